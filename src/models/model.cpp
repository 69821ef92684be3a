#include "frugal/models/model.h"

#include <ATen/ops/linear.h>
#include <torch/nn/functional/loss.h>

#include <optional>

#include "frugal/data/batch.h"
#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal {

at::Tensor cross_entropy_sum(const at::Tensor& output, const at::Tensor& targets) {
  const int64_t classes = output.size(-1);
  return torch::nn::functional::cross_entropy(
      output.reshape({-1, classes}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(
          kIgnoreIndex));
}

at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x) {
  const std::optional<at::Tensor> bias =
      layer->bias.defined() ? std::optional<at::Tensor>(layer->bias) : std::nullopt;
  // A plain layer has no children: adapters and NF4 bases cost it one empty check. (Casting
  // meta inputs as autocast would: a no-op outside the planner's trace.)
  auto plain = [&] {
    at::Tensor w = layer->weight;
    // A frozen weight stored in autocast's dtype (store_frozen_linear_weights), used outside
    // autocast (an fp32 evaluation, generation): computed in the input's dtype.
    if (w.scalar_type() != x.scalar_type() && !autocast_dtype(x.device().type())) {
      w = w.to(x.scalar_type());
    }
    return at::linear(autocast_meta_input(x), autocast_meta_input(w),
                      bias ? std::optional<at::Tensor>(autocast_meta_input(*bias)) : std::nullopt);
  };
  if (layer->children().empty()) return plain();
  const nf4::Nf4Weight* q = nf4_weight_of(*layer);
  at::Tensor y = q ? nf4::linear(x, *q, bias) : plain();
  if (lora_down_of(*layer) != nullptr) y = y + lora_delta(*layer, x).to(y.scalar_type());
  return y;
}

at::Tensor Model::forward_batch(const Batch& batch) {
  if (batch.attention_mask.defined() || batch.position_ids.defined()) {
    throw Error("model: this model type takes no attention mask or position ids (model.type: "
                "llama does; data.eot_token makes them)");
  }
  return forward(batch.x);
}

at::Tensor Model::batch_loss_sum(const Batch& batch) {
  return loss_sum(forward_batch(batch), batch.y);
}

at::Tensor Model::loss_sum(const at::Tensor& output, const at::Tensor& targets) const {
  return cross_entropy_sum(output, targets);
}

}  // namespace frugal
