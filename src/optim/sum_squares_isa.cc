// Compiled three times (src/CMakeLists.txt), CPU_CAPABILITY = DEFAULT, AVX2, AVX512. Plain
// loops the compiler vectorizes: 16 independent fp64 partial sums need no reassociation, so
// no -ffast-math, and the result does not depend on the instruction set.
#include "sum_squares_isa.h"

#define FRUGAL_CONCAT_(a, b) a##_##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_(a, b)

namespace frugal::sum_squares_isa {

double FRUGAL_CONCAT(sum_squares, CPU_CAPABILITY)(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  double partial[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double v = x[i + j];
      partial[j] += v * v;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const double v = x[i];
    partial[j] += v * v;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace frugal::sum_squares_isa
