#include "cpu_isa.h"

namespace frugal {

CpuIsa best_cpu_isa() {
  static const CpuIsa isa = [] {
#if defined(__x86_64__) || defined(__i386__)
    // The AVX-512 build of at::vec uses the F, BW, VL and DQ subsets.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      return CpuIsa::Avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::Avx2;
#endif
    return CpuIsa::Default;
  }();
  return isa;
}

}  // namespace frugal
