// Models built on the meta device (memory::OnMetaDevice) have parameters with shapes and no
// memory: nothing is allocated or initialised. A loader that fills them one tensor at a time
// (hf::load_weights_quantized) gives each parameter its real tensor here, so that the model
// never exists twice, nor at full precision where it is stored quantized.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>

namespace frugal {

// Gives `owner`'s own parameter `name` the tensor `value` (its requires_grad kept): in the
// module's parameter table, in the same place, and in the member its forward reads. The module
// kinds frugal's models are made of are known (Linear, Embedding, LayerNorm, RmsNorm, and the
// LoRA down projection); a parameter of another kind of module is a frugal::Error naming it.
void materialize_parameter(torch::nn::Module& owner, const std::string& name, at::Tensor value);

}  // namespace frugal
