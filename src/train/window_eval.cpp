#include "frugal/train/window_eval.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "frugal/data/batch.h"
#include "frugal/util/error.h"

namespace frugal {

WindowEval sliding_window_eval(Model& model, const std::vector<int64_t>& ids, int64_t seq_len,
                               int64_t stride, const c10::Device& device) {
  return sliding_window_eval(
      model, static_cast<int64_t>(ids.size()),
      [&](int64_t start, int64_t count, int64_t* out) {
        std::copy_n(ids.begin() + start, count, out);
      },
      seq_len, stride, device);
}

WindowEval sliding_window_eval(Model& model, const TokenStream& tokens, int64_t seq_len,
                               int64_t stride, const c10::Device& device) {
  return sliding_window_eval(
      model, tokens.size(),
      [&](int64_t start, int64_t count, int64_t* out) { tokens.read(start, count, out); }, seq_len,
      stride, device);
}

WindowEval sliding_window_eval(Model& model, int64_t n, const TokenReader& read, int64_t seq_len,
                               int64_t stride, const c10::Device& device) {
  if (seq_len < 2) throw Error(fmt::format("eval: --seq-len must be >= 2, got {}", seq_len));
  if (stride < 1 || stride > seq_len) {
    throw Error(fmt::format("eval: --stride must be between 1 and --seq-len ({}), got {}",
                            seq_len, stride));
  }
  if (n < 2) throw Error(fmt::format("eval: the data holds {} token(s); at least 2 are needed", n));
  torch::NoGradGuard no_grad;
  WindowEval r;
  double total = 0;
  int64_t scored_to = 0;  // positions <= this are predicted already (position 0 never is)
  for (int64_t begin = 0; scored_to < n - 1; begin += stride) {
    const int64_t end = std::min(begin + seq_len, n);
    at::Tensor window = at::empty({end - begin}, at::kLong);
    read(begin, end - begin, window.data_ptr<int64_t>());
    at::Tensor x = window.slice(0, 0, end - begin - 1).unsqueeze(0);
    at::Tensor y = window.slice(0, 1, end - begin).clone().unsqueeze(0);
    // Targets an earlier window predicted already are left out (labels at or before scored_to).
    const int64_t seen = std::max<int64_t>(0, scored_to - begin);
    if (seen > 0) y.slice(1, 0, seen).fill_(kIgnoreIndex);
    const at::Tensor loss = model.loss_sum(model.forward(x.to(device)), y.to(device));
    total += loss.to(at::kDouble).item<double>();
    r.predicted += (end - 1) - scored_to;
    scored_to = end - 1;
    ++r.windows;
  }
  r.mean_loss = total / static_cast<double>(r.predicted);
  r.perplexity = std::exp(r.mean_loss);
  return r;
}

}  // namespace frugal
