// Shared by the folder loaders (folder.cpp, quantized_load.cpp).
#pragma once

#include <torch/nn/module.h>

#include <filesystem>

#include "frugal/io/named_tensors.h"

namespace frugal::hf {

// The folder's tensors the model has (memory-mapped views), checked against it: every
// parameter there with its shape, nothing else (a tied model's saved output projection that
// equals the embedding is dropped); a frugal::Error names the folder and the tensor. Only the
// model's shapes are read: a model built on the meta device is checked the same way.
io::NamedTensors checked_weights(torch::nn::Module& model, const std::filesystem::path& dir);

}  // namespace frugal::hf
