#include "frugal/strategy/recompute.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <utility>
#include <vector>

#include "frugal/strategy/activation_offload.h"
#include "frugal/util/error.h"
#include "frugal/util/trace.h"
#include "replay_state.h"
#include "saved_tensor_hooks.h"

namespace frugal {
namespace {

using Fn = std::function<at::Tensor(const at::Tensor&)>;

// Thrown by the recompute's last pack: backward has everything it needs, and the rest of fn
// (typically a block's last matmul and residual add, whose results nothing saved) is skipped.
struct RecomputeComplete {};

struct SavedShape {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
};

// One checkpointed call of fn. The forward builds the autograd graph as usual, but every
// tensor it saves is replaced by its position here; the first time backward asks for one,
// fn runs again from the kept input and refills every position.
struct Frame {
  Fn fn;
  at::Tensor input;  // detached: the one activation a checkpoint keeps
  // With activation offload, the input waits in host memory instead (input is undefined).
  std::shared_ptr<ActivationOffload> offload;
  ActivationOffload::Handle stashed;
  bool input_requires_grad = false;
  // The input's version counter (not the tensor: it must not keep an offloaded input alive).
  c10::VariableVersion version_counter{c10::VariableVersion::DISABLED};
  uint32_t input_version = 0;
  detail::RngState rng;
  detail::AutocastState autocast;
  std::vector<SavedShape> saved;        // forward: what autograd saved, in order
  std::vector<at::Tensor> recomputed;   // backward: the same tensors, recomputed
  size_t filled = 0;

  void recompute();
};

// A tensor the forward saved: packing records its position and shape only; unpacking returns
// the recomputed tensor (and lets go of it: each saved tensor is unpacked once per backward).
class ForwardHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit ForwardHooks(std::shared_ptr<Frame> frame) : frame_(std::move(frame)) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    index_ = frame_->saved.size();
    frame_->saved.push_back({tensor.sizes().vec(), tensor.scalar_type()});
  }
  at::Tensor call_unpack_hook() override {
    // Not there: not recomputed yet, or taken by a previous backward (retain_graph).
    if (index_ >= frame_->recomputed.size() || !frame_->recomputed[index_].defined()) {
      frame_->recompute();
    }
    return std::exchange(frame_->recomputed[index_], at::Tensor());
  }

 private:
  std::shared_ptr<Frame> frame_;
  size_t index_ = 0;
};

// A tensor the recompute saves: it fills the forward's position of the same rank.
class RecomputeHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit RecomputeHooks(Frame* frame) : frame_(frame) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    Frame& f = *frame_;
    if (f.filled >= f.saved.size()) {
      throw Error(fmt::format("activation checkpointing: the recomputation saved more tensors "
                              "than the forward ({}): the checkpointed function must run the "
                              "same operations every time",
                              f.saved.size()));
    }
    const SavedShape& expected = f.saved[f.filled];
    if (tensor.sizes() != expected.sizes || tensor.scalar_type() != expected.dtype) {
      throw Error(fmt::format("activation checkpointing: saved tensor {} was {} {} in the forward "
                              "and {} {} when recomputed: the checkpointed function must run the "
                              "same operations every time",
                              f.filled, c10::toString(expected.dtype),
                              c10::str(at::IntArrayRef(expected.sizes)),
                              c10::toString(tensor.scalar_type()), c10::str(tensor.sizes())));
    }
    f.recomputed[f.filled++] = tensor.detach();
    if (f.filled == f.saved.size()) throw RecomputeComplete{};
  }
  at::Tensor call_unpack_hook() override {
    throw Error("activation checkpointing: the recomputation's own graph is never run backward");
  }

 private:
  Frame* frame_;
};

void Frame::recompute() {
  if (version_counter.enabled() && version_counter.current_version() != input_version) {
    throw Error("activation checkpointing: the input of a checkpointed function was modified in "
                "place after its forward; the recomputation would not see the same values");
  }
  trace::Range range("recompute");
  recomputed.assign(saved.size(), at::Tensor());
  filled = 0;
  at::Tensor x = stashed ? offload->fetch(stashed) : input.detach();
  x.requires_grad_(input_requires_grad);  // the same ops save the same tensors
  {
    detail::RngReplay rng_replay(rng);  // puts the generators' current state back on exit
    detail::AutocastReplay autocast_replay(autocast);
    at::AutoGradMode grad_mode(true);
    detail::SavedTensorHooksScope hooks([this] { return std::make_unique<RecomputeHooks>(this); });
    try {
      (void)fn(x);
    } catch (const RecomputeComplete&) {
    }
  }
  if (filled != saved.size()) {
    throw Error(fmt::format("activation checkpointing: the recomputation saved {} tensors, the "
                            "forward {}: the checkpointed function must run the same operations "
                            "every time",
                            filled, saved.size()));
  }
}

}  // namespace

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input) {
  return checkpoint(fn, input, nullptr);
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input, const std::shared_ptr<ActivationOffload>& offload) {
  // Nothing will be backpropagated (evaluation, no_grad): nothing to save or recompute. Inside
  // another checkpointed function (or its recomputation) that one's hooks take every tensor.
  if (!at::GradMode::is_enabled() || detail::SavedTensorHooksScope::active()) return fn(input);
  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  if (offload) {
    frame->offload = offload;
    frame->stashed = offload->stash(input.detach());
  } else {
    frame->input = input.detach();
  }
  frame->input_requires_grad = input.requires_grad();
  frame->version_counter = input.unsafeGetTensorImpl()->version_counter();
  frame->input_version = input._version();
  // The input's CUDA generator is the one dropout on that device draws from.
  frame->rng =
      detail::capture_rng(input.is_cuda() ? input.device() : c10::Device(c10::DeviceType::CPU));
  frame->autocast = detail::capture_autocast();
  detail::SavedTensorHooksScope hooks([frame] { return std::make_unique<ForwardHooks>(frame); });
  return fn(input);
}

}  // namespace frugal
