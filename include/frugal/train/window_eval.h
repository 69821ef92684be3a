// A causal language model's loss over a long token sequence, in sliding windows (transformers'
// strided perplexity): windows of at most seq_len tokens start every `stride` tokens, and each
// token from the second on is predicted once, in the first window that reaches it, with that
// window's tokens before it as context. stride == seq_len: disjoint windows; a smaller stride
// gives each prediction more context at more compute.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "frugal/data/token_stream.h"
#include "frugal/models/model.h"

namespace frugal {

struct WindowEval {
  double mean_loss = 0;    // nats per predicted token
  double perplexity = 0;   // exp(mean_loss)
  int64_t predicted = 0;   // tokens predicted (the sequence's length - 1)
  int64_t windows = 0;
};

// The model is run as it is (eval mode is the caller's), without gradients, a window at a time
// on `device`. A frugal::Error when seq_len < 2, stride < 1 or > seq_len, or fewer than 2 tokens.
WindowEval sliding_window_eval(Model& model, const std::vector<int64_t>& ids, int64_t seq_len,
                               int64_t stride, const c10::Device& device);
// The same over a token file's tokens, read a window at a time: host memory holds one window,
// however large the file.
WindowEval sliding_window_eval(Model& model, const TokenStream& tokens, int64_t seq_len,
                               int64_t stride, const c10::Device& device);

// Reads `count` tokens from `start` into `out`.
using TokenReader = std::function<void(int64_t start, int64_t count, int64_t* out)>;
// The same over `n` tokens that `read` gives.
WindowEval sliding_window_eval(Model& model, int64_t n, const TokenReader& read, int64_t seq_len,
                               int64_t stride, const c10::Device& device);

}  // namespace frugal
