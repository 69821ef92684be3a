// Moving a training state in and out of checkpoints: a module's parameters and buffers by
// name, an optimizer's archive as bytes, and the default generators' RNG states.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <set>
#include <string>

#include "frugal/io/checkpoint.h"

namespace frugal {

// Parameters then buffers, by their dotted names, as contiguous CPU copies; names in `skip`
// (parameters a sharded checkpoint stores in shards) are left out.
NamedTensors module_state(const torch::nn::Module& module, const std::set<std::string>& skip = {});
// Copies values in; every name must exist with the same shape and dtype, and every parameter
// and buffer not in `skip` must be given (a mismatch is a frugal::Error naming `what`).
void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what, const std::set<std::string>& skip = {});

std::string optimizer_state(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes,
                          const std::string& what);

// The CPU generator's state (and each CUDA device's when present), for exact resume of
// dropout and anything else random.
NamedTensors rng_state();
void load_rng_state(const NamedTensors& state);

}  // namespace frugal
