#include "frugal/models/mlp.h"

#include <ATen/ATen.h>

namespace frugal {

Mlp::Mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t out_features) {
  layers = register_module("layers", torch::nn::ModuleList());
  int64_t width = in_features;
  for (int64_t h : hidden) {
    layers->push_back(torch::nn::Linear(width, h));
    width = h;
  }
  head = register_module("head", torch::nn::Linear(width, out_features));
}

at::Tensor Mlp::forward(const at::Tensor& x) {
  at::Tensor h = x.flatten(1);  // (B, F)
  for (const auto& layer : *layers) h = at::relu(layer->as<torch::nn::Linear>()->forward(h));
  return head->forward(h);
}

}  // namespace frugal
