// The sum of squares of fp32 values, accumulated in fp64 (every square is exact in fp64), for
// the global gradient norm of clipping: compiled once per instruction set as
// cpu_adam_isa.cc is (src/CMakeLists.txt); optim/clip.cpp picks one and splits the work
// over threads.
#pragma once

#include <cstdint>

namespace frugal::sum_squares_isa {

#define FRUGAL_SUM_SQUARES_DECLARE(ISA) double sum_squares_##ISA(const float* x, int64_t n);
FRUGAL_SUM_SQUARES_DECLARE(DEFAULT)
FRUGAL_SUM_SQUARES_DECLARE(AVX2)
FRUGAL_SUM_SQUARES_DECLARE(AVX512)
#undef FRUGAL_SUM_SQUARES_DECLARE

}  // namespace frugal::sum_squares_isa
