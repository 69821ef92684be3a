// The default generators' RNG states, for checkpoints. (A module's tensors by name:
// io/module_state.h; the optimizer's state by parameter name: optim/param_state.h.)
#pragma once

#include "frugal/io/checkpoint.h"
#include "frugal/io/module_state.h"

namespace frugal {

using io::load_module_state;
using io::module_state;

// The CPU generator's state (and each CUDA device's when present), for exact resume of
// dropout and anything else random.
NamedTensors rng_state();
void load_rng_state(const NamedTensors& state);

}  // namespace frugal
