// A multi-layer perceptron: Linear -> ReLU per hidden size, then a Linear head.
// Parameter names: layers.0.weight, layers.0.bias, ..., head.weight, head.bias.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "frugal/config/config.h"
#include "frugal/models/model.h"

namespace frugal {

class Mlp : public Model {
 public:
  Mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t out_features);
  at::Tensor forward(const at::Tensor& x) override;  // (B, F) -> (B, out)

  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace frugal
