#include "frugal/models/kv_cache.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace frugal {

KvCache::KvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t capacity,
                 int64_t head_dim, const at::TensorOptions& options)
    : capacity_(capacity) {
  for (int64_t i = 0; i < layers; ++i) {
    keys_.push_back(at::empty({batch, kv_heads, capacity, head_dim}, options));
    values_.push_back(at::empty({batch, kv_heads, capacity, head_dim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> KvCache::append(size_t layer, const at::Tensor& k,
                                                  const at::Tensor& v) {
  const int64_t T = k.size(2);
  if (layer >= keys_.size() || length_ + T > capacity_) {
    throw std::logic_error("KvCache: layer " + std::to_string(layer) + " or " +
                           std::to_string(length_ + T) + " tokens beyond the cache's " +
                           std::to_string(keys_.size()) + " layers / " + std::to_string(capacity_) +
                           " positions");
  }
  keys_[layer].narrow(2, length_, T).copy_(k);
  values_[layer].narrow(2, length_, T).copy_(v);
  return {keys_[layer].narrow(2, 0, length_ + T), values_[layer].narrow(2, 0, length_ + T)};
}

void KvCache::advance(int64_t tokens) { length_ += tokens; }

at::Tensor attend_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         int64_t past) {
  const int64_t T = q.size(2), group = q.size(1) / k.size(1);
  if (past == 0 || T == 1) {
    // The prompt alone: SDPA's causal kernels. One new token sees every key: no mask at all.
    return at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, /*is_causal=*/T > 1,
                                            std::nullopt, /*enable_gqa=*/group > 1);
  }
  // Several tokens after a filled cache: SDPA's is_causal aligns the triangle to the top-left
  // corner, so the mask is explicit (key j is seen by query i when j <= past + i), and with a
  // mask grouped-query heads are repeated (as in the model's masked training path).
  const int64_t L = k.size(2);
  const auto on = q.options().dtype(at::kLong);
  const at::Tensor mask = at::arange(L, on).unsqueeze(0) <= at::arange(T, on).unsqueeze(1) + past;
  at::Tensor keys = k, values = v;
  if (group > 1) {
    keys = k.repeat_interleave(group, 1);
    values = v.repeat_interleave(group, 1);
  }
  return at::scaled_dot_product_attention(q, keys, values, mask, 0.0, false);
}

}  // namespace frugal
