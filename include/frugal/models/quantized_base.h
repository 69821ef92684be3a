// The frozen base weights of linear layers stored in 4-bit NormalFloat (QLoRA's base model,
// frugal/quant/nf4.h). quantize_linear_layers replaces a layer's `weight` parameter by a child
// module `weight_nf4` holding the NF4 tensors: the weight is no longer a parameter (nothing
// trains, reduces, shards or saves it), the layer keeps its bias, and frugal::linear computes
// the layer through nf4::linear, which dequantizes in forward and again in backward.
// The NF4 tensors follow the model's moves between devices (module.to(device)); they are not
// buffers, so checkpoints leave them out as they leave out every frozen weight.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

#include "frugal/quant/nf4.h"

namespace frugal {

class Nf4BaseImpl : public torch::nn::Module {
 public:
  explicit Nf4BaseImpl(nf4::Nf4Weight w) : weight(std::move(w)) {}
  nf4::Nf4Weight weight;

  // Moves the NF4 tensors with the module; a dtype change leaves them as they are (the
  // forward computes in the input's dtype).
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;
};

// The layer's NF4 weight, or null when its weight is a plain tensor.
const nf4::Nf4Weight* nf4_weight_of(const torch::nn::LinearImpl& layer);

// The layer's weight shape (out, in), whether plain or NF4.
std::vector<int64_t> linear_weight_shape(const torch::nn::LinearImpl& layer);

// The layer's weight as a full tensor (dequantized for NF4, in `dtype`).
at::Tensor linear_weight(const torch::nn::LinearImpl& layer, at::ScalarType dtype);

// The linear layers `targets` names (as LoRA's targets: a name or its last parts, or
// all-linear), each not yet quantized checked to fit NF4 (its size a multiple of 16384, else a
// frugal::Error prefixed by `key` naming the layer and its shape).
std::vector<std::pair<std::string, torch::nn::Linear>> nf4_layers(
    torch::nn::Module& module, const std::vector<std::string>& targets, const std::string& key);

// Stores `q` as the layer's weight: the weight parameter (and its tensor) leaves the layer, a
// child `weight_nf4` holds the NF4 tensors.
void set_nf4_weight(torch::nn::LinearImpl& layer, nf4::Nf4Weight q);

// Quantizes the weights of the linear layers `targets` names (as LoRA's targets: a name or its
// last parts, or all-linear) to NF4. `key` names the setting in errors (e.g.
// "model.quantize_base.modules"); a weight NF4 cannot hold (its size not a multiple of 16384)
// is refused before any layer changes. Returns the quantized layers' names.
std::vector<std::string> quantize_linear_layers(torch::nn::Module& module,
                                                const std::vector<std::string>& targets,
                                                const std::string& key);

}  // namespace frugal
