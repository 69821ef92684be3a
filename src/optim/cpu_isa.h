// The widest instruction set, of those frugal compiles its CPU kernels for (src/optim/*_isa.cc,
// built once per set as ATen builds its own), that the running CPU supports: checked once.
#pragma once

namespace frugal {

enum class CpuIsa { Default, Avx2, Avx512 };

CpuIsa best_cpu_isa();

}  // namespace frugal
