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

// Gives every parameter of a model built on the meta device a tensor of its shape and dtype on
// `device` that holds no memory yet (an empty storage): for a sharding that cuts parameters
// into shards and has their values loaded into the shards afterwards (zero3 and hsdp with
// model.init_from), so that the whole model never exists on a rank. Each is allocated and let
// go in turn. has_values tells such a module apart.
void materialize_without_values(torch::nn::Module& model, const c10::Device& device);
// Whether the module's first parameter holds its values (false after materialize_without_values;
// true for a module without parameters).
bool has_values(const torch::nn::Module& model);

}  // namespace frugal
