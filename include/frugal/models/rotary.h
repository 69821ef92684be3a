// Rotary position embeddings (RoPE, Su et al. 2021) as the Llama family applies them: each
// head's dimensions are split in halves (x1, x2), rotated as x * cos + (-x2, x1) * sin with
// angles position x inv_freq, inv_freq_i = theta^(-2i / head_dim). Llama 3.1's scaling
// (`llama3`) divides the low frequencies (wavelengths beyond original_max_position /
// low_freq_factor) by `factor`, keeps the high ones (wavelengths below original_max_position
// / high_freq_factor) and blends those between. The angles are computed in float32 and
// rounded to the activations' dtype, as transformers does, so logits match it.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <mutex>
#include <tuple>

namespace frugal {

struct RopeOptions {
  int64_t head_dim = 64;
  double theta = 10000.0;
  bool llama3_scaling = false;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// The inverse frequencies (head_dim / 2, float32), scaled as the options say.
at::Tensor rope_inverse_frequencies(const RopeOptions& o);

class RotaryEmbedding {
 public:
  explicit RotaryEmbedding(const RopeOptions& o);
  // x (B, heads, T, head_dim) rotated by positions 0..T-1.
  at::Tensor apply(const at::Tensor& x);
  // cos and sin (T, head_dim) on `device`, computed in float32 and rounded to `dtype`, shared
  // per (T, device, dtype) while anyone holds them: every layer's rotation reads the same two
  // tensors, so backward saves them once, not once per layer (under bf16 autocast a per-layer
  // cast would keep 4 T head_dim bf16 values per layer alive until backward). The cache holds
  // them weakly: once the step's graph lets go of them they are freed, as transformers frees
  // its per-forward copies, instead of sitting in memory between steps.
  std::pair<at::Tensor, at::Tensor> cos_sin(int64_t T, c10::Device device,
                                            at::ScalarType dtype = at::kFloat);
  // cos and sin (B, 1, T, head_dim) in float32 for explicit positions (B, T) int64 (packed
  // documents, padding): not cached, they change with every batch.
  std::pair<at::Tensor, at::Tensor> cos_sin_at(const at::Tensor& position_ids) const;
  // x * cos + rotate_half(x) * sin, cos / sin (float32) broadcast against x and rounded to its
  // dtype first, as transformers does.
  static at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

 private:
  // The inverse frequencies (CPU float32), computed at first use rather than in the constructor:
  // a model built on the meta device (the planner's trace, the quantizing load of
  // hf::load_weights_quantized) gets real ones once it runs for real.
  const at::Tensor& inverse_frequencies() const;

  RopeOptions options_;
  mutable std::once_flag inv_freq_once_;
  mutable at::Tensor inv_freq_;
  std::mutex mutex_;
  using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  std::map<std::tuple<int64_t, std::string, int>, std::pair<WeakTensor, WeakTensor>> cache_;
};

}  // namespace frugal
