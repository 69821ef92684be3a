#include "frugal/models/rotary.h"

#include <ATen/ATen.h>

#include <cmath>

namespace frugal {

at::Tensor rope_inverse_frequencies(const RopeOptions& o) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor inv_freq =
      1.0 / at::pow(o.theta, at::arange(0, o.head_dim, 2, at::TensorOptions().dtype(at::kLong))
                                 .to(at::kFloat) /
                             static_cast<double>(o.head_dim));
  if (!o.llama3_scaling) return inv_freq.to(f32.dtype());
  const double old_len = static_cast<double>(o.original_max_position);
  const double low_freq_wavelen = old_len / o.low_freq_factor;
  const double high_freq_wavelen = old_len / o.high_freq_factor;
  const at::Tensor wavelen = 2.0 * M_PI / inv_freq;
  // Long wavelengths (low frequencies) are divided by the factor, short ones kept.
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / o.factor, inv_freq);
  // Between the two, a blend from divided to kept.
  const at::Tensor smooth =
      (old_len / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
  const at::Tensor smoothed = (1.0 - smooth) * scaled / o.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled).to(at::kFloat);
}

RotaryEmbedding::RotaryEmbedding(const RopeOptions& o) : options_(o) {}

const at::Tensor& RotaryEmbedding::inverse_frequencies() const {
  std::call_once(inv_freq_once_, [this] { inv_freq_ = rope_inverse_frequencies(options_); });
  return inv_freq_;
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(int64_t T, c10::Device device,
                                                           at::ScalarType dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_tuple(T, device.str(), static_cast<int>(dtype));
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    at::Tensor cos(it->second.first.lock()), sin(it->second.second.lock());
    if (cos.defined() && sin.defined()) return {cos, sin};
  }
  // Angles in float32 (autocast does not reach here: plain ATen ops on float32 inputs); only
  // the rounded pair is kept.
  const at::Tensor inv = inverse_frequencies().to(device);
  const at::Tensor pos = at::arange(T, at::TensorOptions().dtype(at::kFloat).device(device));
  const at::Tensor freqs = at::outer(pos, inv);             // (T, head_dim / 2)
  const at::Tensor angles = at::cat({freqs, freqs}, -1);    // (T, head_dim)
  std::pair<at::Tensor, at::Tensor> value(angles.cos().to(dtype), angles.sin().to(dtype));
  cache_.insert_or_assign(key, std::make_pair(WeakTensor(value.first.getIntrusivePtr()),
                                              WeakTensor(value.second.getIntrusivePtr())));
  return value;
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin_at(const at::Tensor& position_ids) const {
  const at::Tensor inv = inverse_frequencies().to(position_ids.device());
  const at::Tensor freqs = position_ids.to(at::kFloat).unsqueeze(-1) * inv;  // (B, T, head_dim / 2)
  const at::Tensor angles = at::cat({freqs, freqs}, -1).unsqueeze(1);        // (B, 1, T, head_dim)
  return {angles.cos(), angles.sin()};
}

at::Tensor RotaryEmbedding::rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  const at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

at::Tensor RotaryEmbedding::apply(const at::Tensor& x) {
  auto [cos, sin] = cos_sin(x.size(2), x.device(), x.scalar_type());
  return rotate(x, cos, sin);
}

}  // namespace frugal
