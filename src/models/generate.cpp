#include "frugal/models/generate.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "frugal/models/decode.h"

namespace frugal {

at::Tensor sample_tokens(Model& model, at::Tensor idx, const SamplingOptions& o,
                         at::Generator generator) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  for (int64_t i = 0; i < o.new_tokens; ++i) {
    const int64_t T = idx.size(1);
    at::Tensor context = o.context > 0 && T > o.context ? idx.slice(1, T - o.context) : idx;
    at::Tensor logits = model.forward(context).select(1, -1).to(at::kFloat) / o.temperature;
    logits = restrict_logits(logits, o.top_k, 1.0);
    at::Tensor next = at::multinomial(at::softmax(logits, -1), 1, /*replacement=*/false, generator);
    idx = at::cat({idx, next}, 1);
    if (o.stop_token && next.item<int64_t>() == *o.stop_token) break;
  }
  model.train(was_training);
  return idx;
}

}  // namespace frugal
