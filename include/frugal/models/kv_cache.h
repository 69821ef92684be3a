// Incremental decoding: the keys and values of the tokens a decoder has already seen, kept per
// layer so that each new token runs the model over itself alone (one matrix-vector product per
// weight) instead of over the whole sequence again. What `frugal generate` decodes with
// (models/decode.h); the training path never sees it.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <utility>
#include <vector>

namespace frugal {

// Per layer, keys and values (B, kv_heads, capacity, head_dim) allocated once for the whole
// generation (no concatenation per token), of which the first `length()` positions are filled.
class KvCache {
 public:
  KvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim,
          const at::TensorOptions& options);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  // Writes k / v (B, kv_heads, T, head_dim) after the filled positions of `layer` and returns
  // that layer's keys and values up to them (views, no copy). The length moves on only with
  // advance(), once every layer has appended the same T tokens.
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v);
  void advance(int64_t tokens);

 private:
  std::vector<at::Tensor> keys_, values_;
  int64_t capacity_;
  int64_t length_ = 0;
};

// Attention of the new queries q (B, heads, T, head_dim) over keys / values (B, kv_heads,
// past + T, head_dim) that end with theirs: query i sees the keys up to position past + i.
// Grouped-query heads are not repeated. (B, heads, T, head_dim).
at::Tensor attend_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         int64_t past);

// A decoder that can run incrementally. forward_cached: the logits (B, T, vocab) of tokens
// idx (B, T) that follow the cache's length() tokens, whose keys and values it appends.
class CachedDecoder {
 public:
  virtual ~CachedDecoder() = default;
  // An empty cache for `batch` sequences of at most `capacity` tokens, in `options`' dtype and
  // device (the model's).
  virtual KvCache make_cache(int64_t batch, int64_t capacity,
                             const at::TensorOptions& options) const = 0;
  virtual at::Tensor forward_cached(const at::Tensor& idx, KvCache& cache) = 0;
  // The most tokens a sequence may hold (positions the model has embeddings or was built for).
  virtual int64_t max_sequence() const = 0;
};

}  // namespace frugal
