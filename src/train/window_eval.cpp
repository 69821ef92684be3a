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
  if (seq_len < 2) throw Error(fmt::format("eval: --seq-len must be >= 2, got {}", seq_len));
  if (stride < 1 || stride > seq_len) {
    throw Error(fmt::format("eval: --stride must be between 1 and --seq-len ({}), got {}",
                            seq_len, stride));
  }
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 2) throw Error(fmt::format("eval: the data holds {} token(s); at least 2 are needed", n));
  torch::NoGradGuard no_grad;
  const at::Tensor all = at::tensor(ids, at::kLong);
  WindowEval r;
  double total = 0;
  int64_t scored_to = 0;  // positions <= this are predicted already (position 0 never is)
  for (int64_t begin = 0; scored_to < n - 1; begin += stride) {
    const int64_t end = std::min(begin + seq_len, n);
    at::Tensor x = all.slice(0, begin, end - 1).unsqueeze(0);
    at::Tensor y = all.slice(0, begin + 1, end).clone().unsqueeze(0);
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
