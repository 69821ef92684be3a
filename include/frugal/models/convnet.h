// A small ConvNet for image classification: per entry of `channels` a 3x3 conv (padding 1),
// ReLU and 2x2 max-pool, then a linear classifier. Names: convs.0.weight, ..., head.weight.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "frugal/models/model.h"

namespace frugal {

class ConvNet : public Model {
 public:
  ConvNet(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels,
          int64_t num_classes);
  at::Tensor forward(const at::Tensor& x) override;  // (B, C, H, W) -> (B, classes)

  torch::nn::ModuleList convs{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace frugal
