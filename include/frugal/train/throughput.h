// Model FLOPs utilisation: the model's training FLOPs per token (Model::flops_per_token: 6N
// plus the attention term, as PaLM's appendix B counts them), the FLOP/s a step achieved, and
// their ratio to the hardware's peak: train.peak_flops, or the bf16 dense tensor-core peak of
// a known GPU.
#pragma once

#include <c10/core/Device.h>

#include <optional>

namespace frugal {

// The bf16 dense peak (FLOP/s) of the GPU `device` is, when its name is known (H100, H200,
// A100, ...); none for a CPU or an unknown GPU.
std::optional<double> known_peak_flops(const c10::Device& device);

struct Throughput {
  double flops_per_token = 0.0;  // 0 = the model does not say
  std::optional<double> peak;    // FLOP/s of this rank's device

  // FLOP/s of one step of `tokens` tokens (this rank's) in `seconds`; 0 when unknown.
  double achieved(double tokens, double seconds) const {
    return seconds > 0 ? flops_per_token * tokens / seconds : 0.0;
  }
  std::optional<double> mfu(double tokens, double seconds) const {
    if (!peak || *peak <= 0 || flops_per_token <= 0) return std::nullopt;
    return achieved(tokens, seconds) / *peak;
  }
};

}  // namespace frugal
