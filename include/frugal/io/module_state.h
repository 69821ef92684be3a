// A module's parameters and buffers by their dotted names, out and back in: what checkpoints,
// exports and tests read and write of a model.
#pragma once

#include <torch/nn/module.h>

#include <set>
#include <string>

#include "frugal/io/named_tensors.h"

namespace frugal::io {

// Parameters then buffers, by their dotted names, as contiguous CPU tensors: on the CPU they
// share the live tensors' memory (as PyTorch's state_dict does), so that a save never holds a
// second copy of the model; whoever keeps them past the next step (an asynchronous save)
// copies them. Names in `skip`
// (parameters a sharded checkpoint stores in shards) are left out, and so are frozen parameters
// (requires_grad false): training never changes them, so a checkpoint keeps only what it did
// change, and the frozen base comes from where the model was built from (its seed, or
// model.init_from). load_module_state neither expects nor takes them.
NamedTensors module_state(const torch::nn::Module& module, const std::set<std::string>& skip = {});
// Copies values in; every name must exist with the same shape and dtype, and every parameter
// and buffer not in `skip` must be given (a mismatch is a frugal::Error naming `what`).
void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what, const std::set<std::string>& skip = {});

}  // namespace frugal::io
