// Activation checkpointing of one function: forward keeps only the input, backward runs the
// function again to rebuild its activations and backpropagates through them. Trades one extra
// forward of `fn` for the memory of everything `fn` would have saved for backward.
//
// Guarantees: gradients (of the input and of every parameter `fn` uses, accumulated into their
// .grad as a normal backward would) are bit-identical to running `fn` plainly, dropout
// included: the recompute replays the CPU generator's state (and the input's CUDA device's),
// and the autocast state, of the forward. The generators are put back afterwards, so the rest
// of the step draws the same numbers as an uncheckpointed run.
//
// Limits (those of PyTorch's reentrant checkpoint): backward must be torch::autograd::backward
// / loss.backward(), not torch::autograd::grad or backward with `inputs`, because parameter
// gradients are accumulated into .grad by a nested backward. `fn` must not have side effects
// that differ on a second run (BatchNorm running statistics are updated twice), and the
// objects it refers to must live until backward. Under no-grad, `fn` simply runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace frugal {

// y = fn(input), recomputed in backward. input and y: any shape.
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input);

}  // namespace frugal
