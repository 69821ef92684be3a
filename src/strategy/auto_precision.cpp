// strategy.precision: auto, decided by what the device computes fast (kept apart: it is the
// one file of the precisions that asks CUDA about the device).
#include <cpuid.h>

#include "cuda/cuda_runtime.h"
#include "frugal/strategy/precision.h"

namespace frugal {
namespace {

bool cpu_has_amx_bf16() {
#if defined(__clang__) && __clang_major__ < 16
  // clang before 16 (the fuzz build's clang-14) does not know "amx-bf16" as a feature name:
  // the CPUID bit itself (leaf 7, EDX bit 22).
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && ((d >> 22) & 1) != 0;
#else
  return __builtin_cpu_supports("amx-bf16");
#endif
}

}  // namespace

std::string resolve_precision(const std::string& precision, const c10::Device& device) {
  if (precision != "auto") return precision;
  if (device.is_cuda()) {
    // bf16 tensor cores from Ampere (compute capability 8.0) on; before, fp16 with a scaler.
    const int major = cuda::runtime().properties(device.index() < 0 ? 0 : device.index()).major;
    return major >= 8 ? "bf16-mixed" : "fp16-mixed";
  }
  if (device.is_cpu()) {
    // bf16 dot products in hardware (AVX512-BF16, AMX): bf16 matmuls run faster than fp32's.
    // Without them bf16 is emulated and slower: fp32.
    return __builtin_cpu_supports("avx512bf16") || cpu_has_amx_bf16() ? "bf16-mixed" : "fp32";
  }
  return "fp32";
}

}  // namespace frugal
