// Activation checkpointing of one function: forward keeps only the input, backward runs the
// function again to rebuild what it saved. Trades (most of) one extra forward of `fn` for the
// memory of everything `fn` would have saved for backward.
//
// How (PyTorch's non-reentrant torch.utils.checkpoint, in C++): the forward builds the
// autograd graph as usual, but every tensor autograd saves inside `fn` is dropped at once and
// only its position kept (C++ saved-tensor hooks, src/strategy/saved_tensor_hooks.h). The first
// time backward needs one, `fn` runs again from the kept input and refills them all, and stops
// as soon as the last one is there: a transformer block's final matmul and residual add, whose
// results nothing saved, are not recomputed at all.
//
// Guarantees: gradients (of the input and of every parameter `fn` uses) are bit-identical to
// running `fn` plainly, dropout included: the recompute replays the CPU generator's state (and
// the input's CUDA device's) and the autocast state of the forward, and the generators are put
// back afterwards, so the rest of the step draws the same numbers as an uncheckpointed run.
// Any backward works: loss.backward(), torch::autograd::grad, backward with `inputs`,
// retain_graph (a second backward recomputes again).
//
// Limits: `fn` must run the same operations each time (a different sequence of saved tensors
// is an error that says so), must not have side effects that differ on a second run (BatchNorm
// running statistics are updated twice), and the objects it refers to must live until
// backward; its input must not be modified in place before backward (an error). A checkpoint
// inside a checkpointed function is part of the outer one. Under no-grad, `fn` simply runs.
// The C++ saved-tensor hooks need LibTorch's own autograd engine: inside a Python process
// (whose engine is Python's) this is an error.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace frugal {

class ActivationOffload;

// y = fn(input), recomputed in backward. input and y: any shape.
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input);
// The same, keeping the input in host memory until the recompute needs it
// (strategy/activation_offload.h); a null `offload` keeps it on its device.
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input, const std::shared_ptr<ActivationOffload>& offload);

}  // namespace frugal
