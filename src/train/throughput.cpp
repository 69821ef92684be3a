#include "frugal/train/throughput.h"

#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_runtime.h"

namespace frugal {

std::optional<double> known_peak_flops(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const std::string name = cuda::runtime().properties(device.index() < 0 ? 0 : device.index()).name;
  // Vendors' data sheets, bf16 dense (no sparsity); the first match wins, so the longer names
  // come first.
  static const std::vector<std::pair<std::string, double>> peaks = {
      {"H200", 989e12}, {"H100", 989e12}, {"GH200", 989e12}, {"B200", 2250e12},
      {"A100", 312e12}, {"A800", 312e12}, {"L40S", 362e12},  {"L4", 121e12},
      {"A10G", 70e12},  {"A10", 125e12},  {"RTX 4090", 165e12}, {"RTX 3090", 71e12},
  };
  for (const auto& [key, flops] : peaks) {
    if (name.find(key) != std::string::npos) return flops;
  }
  return std::nullopt;
}

}  // namespace frugal
