#include "frugal/models/convnet.h"

#include <ATen/ATen.h>

#include "frugal/util/error.h"

namespace frugal {

ConvNet::ConvNet(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels,
                 int64_t num_classes) {
  convs = register_module("convs", torch::nn::ModuleList());
  int64_t c = in_channels, side = image_size;
  for (int64_t out : channels) {
    convs->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c, out, 3).padding(1)));
    c = out;
    side /= 2;  // each stage pools 2x2
  }
  if (side < 1) {
    throw Error("model: image_size " + std::to_string(image_size) + " is too small for " +
                std::to_string(channels.size()) + " pooling stages");
  }
  head = register_module("head", torch::nn::Linear(c * side * side, num_classes));
}

at::Tensor ConvNet::forward(const at::Tensor& x) {
  at::Tensor h = x;  // (B, C, H, W)
  for (const auto& conv : *convs) {
    h = at::max_pool2d(at::relu(conv->as<torch::nn::Conv2d>()->forward(h)), {2, 2});
  }
  return head->forward(h.flatten(1));  // (B, classes)
}

}  // namespace frugal
