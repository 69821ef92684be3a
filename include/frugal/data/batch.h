// What a data loader yields and a model consumes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace frugal {

// An integer target that is no loss term (padding, a prompt's tokens in fine-tuning), as
// PyTorch's cross_entropy ignores it by default.
inline constexpr int64_t kIgnoreIndex = -100;

struct Batch {
  at::Tensor x;  // inputs: (B, T) int64 tokens, (B, F) float features or (B, C, H, W) float images
  at::Tensor y;  // targets: (B, T) int64 next tokens, or (B) int64 class labels; kIgnoreIndex
                 // marks a position with no target
  // Optional, for sequence models that honour them (Llama); both (B, T) int64, as
  // transformers takes them:
  at::Tensor attention_mask;  // 1 = a real token, 0 = padding no query attends to
  at::Tensor position_ids;    // each token's position; one that does not follow the previous
                              // by one starts a new document, and attention stays within
                              // documents (packing)
  // Set when the data set's items are whole micro-batches (data.max_tokens_per_batch): the
  // items this batch joins, in order, each its rows and its own length (the batch is padded
  // to the longest). split_batch cuts at them, so each micro-batch is one of those batches.
  struct Part {
    int64_t rows = 0;
    int64_t positions = 0;
  };
  std::vector<Part> parts;

  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  // How many loss terms this batch contributes: integer targets other than kIgnoreIndex, or
  // every element of floating-point ones. The engine divides the step's summed loss by the
  // total over micro-batches and ranks, so the result is the mean over the targets that count
  // (PyTorch's mean cross-entropy with ignore_index), however the step is cut.
  int64_t num_targets() const;
  // Every defined tensor on `device`; asynchronous from pinned memory when non_blocking.
  Batch to(const c10::Device& device, bool non_blocking = false) const;
  // Rows [first, first + count) of every defined tensor (views), without parts.
  Batch rows(int64_t first, int64_t count) const;
  // The first `positions` columns of every defined (B, T) tensor (views), without parts.
  Batch columns(int64_t positions) const;
};

}  // namespace frugal
