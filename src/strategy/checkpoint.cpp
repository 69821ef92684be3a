#include "frugal/strategy/checkpoint.h"

#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <optional>
#include <utility>

#include "replay_state.h"

namespace frugal {
namespace {

using Fn = std::function<at::Tensor(const at::Tensor&)>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Everything backward needs besides the saved input. ctx->saved_data holds IValues only, and a
// plain IValue(ptr) wants a registered custom class: a capsule carries any CustomClassHolder.
struct Recompute : torch::CustomClassHolder {
  Fn fn;
  detail::RngState rng;
  detail::AutocastState autocast;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `anchor` is a tensor requiring grad, passed only when `input` does not require grad, so
  // that the output still joins the graph and backward reaches the parameters inside fn.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const std::optional<at::Tensor>& anchor, const Fn& fn) {
    (void)anchor;
    auto state = c10::make_intrusive<Recompute>();
    state->fn = fn;
    // The input's CUDA generator is the one dropout on that device draws from.
    state->rng =
        detail::capture_rng(input.is_cuda() ? input.device() : c10::Device(c10::DeviceType::CPU));
    state->autocast = detail::capture_autocast();
    // Grad mode is off here (Function::apply): fn keeps no activations. Under autocast, casts
    // made under no-grad are not cached by ATen, so none of them can reach a use of the same
    // weight outside this unit (tests/unit/test_checkpointing.cpp checks it).
    at::Tensor out = fn(input);
    ctx->save_for_backward({input});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(std::move(state));
    return out;
  }

  // grads: {d loss / d out} -> {d loss / d input, none (anchor), none (fn)}
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto state =
        c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data.at("recompute").toCapsule());
    const at::Tensor input = ctx->get_saved_variables()[0];
    // A fresh leaf: the nested backward stops here and leaves d loss / d input in its .grad.
    at::Tensor x = input.detach();
    x.requires_grad_(input.requires_grad());
    at::Tensor out;
    {
      detail::RngReplay rng(state->rng);  // restores the generators' current state on exit
      detail::AutocastReplay autocast(state->autocast);
      at::AutoGradMode grad_mode(true);
      out = state->fn(x);
    }
    // Outside the autocast replay: backward ops must run as in an uncheckpointed backward.
    // Parameters' gradients accumulate into their .grad here, as a plain backward would do.
    // The engine is given the output's graph edge and the output itself is dropped first:
    // nothing needs its values (the last op of a block, typically a residual add, saves
    // none), and keeping it would hold one more activation through the whole nested backward.
    if (out.requires_grad()) {
      torch::autograd::edge_list roots{torch::autograd::impl::gradient_edge(out)};
      out.reset();
      torch::autograd::Engine::get_default_engine().execute(
          roots, {grads.at(0)}, /*keep_graph=*/false, /*create_graph=*/false,
          /*accumulate_grad=*/true);
    }
    at::Tensor dx = x.requires_grad() ? x.grad() : at::Tensor();
    return {dx, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input) {
  // Nothing will be backpropagated (evaluation, no_grad): keeping the input would only cost.
  if (!at::GradMode::is_enabled()) return fn(input);
  std::optional<at::Tensor> anchor;
  if (!input.requires_grad()) {
    // Float whatever the input's dtype: integer tensors (token ids) cannot require grad.
    anchor = at::empty({0}, input.options().dtype(at::kFloat)).requires_grad_(true);
  }
  return CheckpointFunction::apply(input, anchor, fn);
}

}  // namespace frugal
