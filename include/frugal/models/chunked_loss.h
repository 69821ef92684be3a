// The output projection and the cross-entropy computed together, a chunk of tokens at a time,
// so the full logits (tokens x vocabulary floats: 1.6 GB for GPT-2 at B 8, T 1024, fp32) never
// exist. Forward keeps one log-sum-exp per token; backward recomputes each chunk's logits and
// turns them into the chunk's gradients at once. Peak: one chunk's logits (chunk x vocab
// floats, twice in backward) instead of the whole. Results equal the unchunked
// linear + cross_entropy(reduction sum, ignore_index kIgnoreIndex) up to the order of
// summation (fp32: within 1e-5).
//
// Under autocast the matmuls run in the autocast dtype as at::linear would, and the softmax in
// float32 as cross_entropy does; outside autocast, in the inputs' promoted dtype.
#pragma once

#include <ATen/core/Tensor.h>

namespace frugal {

// hidden (N, C), weight (V, C), targets (N) int64 (kIgnoreIndex = no term) -> the summed
// cross-entropy of hidden @ weight^T, a scalar float32. chunk_tokens >= 1.
at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                        const at::Tensor& targets, int64_t chunk_tokens);

}  // namespace frugal
