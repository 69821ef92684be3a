#include "frugal/engine/engine.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "distributed/rank_faults.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/models/lora.h"
#include "frugal/models/model.h"
#include "frugal/optim/clip.h"
#include "frugal/optim/fused_adam.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/activation_offload.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/offload.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"

namespace frugal {

namespace {

// A batch of whole micro-batches (Batch::parts): k of them, each parts / k consecutive parts
// cut to its own longest row, so a token-capped micro-batch stays within its cap.
std::vector<Batch> split_at_parts(const Batch& batch, int64_t k) {
  const auto n = static_cast<int64_t>(batch.parts.size());
  if (n % k != 0) {
    throw Error(
        fmt::format("strategy.accumulation: cannot split {} token-capped batches into {} "
                    "micro-batches",
                    n, k));
  }
  std::vector<Batch> out;
  out.reserve(k);
  int64_t first = 0;
  for (int64_t i = 0; i < k; ++i) {
    int64_t rows = 0, positions = 0;
    for (int64_t p = i * (n / k); p < (i + 1) * (n / k); ++p) {
      rows += batch.parts[p].rows;
      positions = std::max(positions, batch.parts[p].positions);
    }
    out.push_back(batch.rows(first, rows).columns(positions));
    first += rows;
  }
  return out;
}

}  // namespace

std::vector<Batch> split_batch(const Batch& batch, int64_t k) {
  if (k < 1 || batch.size() < k) {
    throw Error("strategy.accumulation: cannot split a batch of " + std::to_string(batch.size()) +
                " samples into " + std::to_string(k) + " micro-batches");
  }
  if (!batch.parts.empty()) return split_at_parts(batch, k);
  if (k == 1) return {batch};
  // As tensor_split cuts: the first n % k micro-batches take one sample more.
  const int64_t n = batch.size();
  std::vector<Batch> out;
  out.reserve(k);
  for (int64_t i = 0, first = 0; i < k; ++i) {
    const int64_t count = n / k + (i < n % k ? 1 : 0);
    out.push_back(batch.rows(first, count));
    first += count;
  }
  return out;
}

Engine::Engine(EngineOptions options, std::shared_ptr<dist::Communicator> comm)
    : options_(std::move(options)),
      comm_(std::move(comm)),
      // "auto" waits for the model's device (setup resolves it); fp32 until then.
      precision_(options_.strategy.precision == "auto" ? "fp32" : options_.strategy.precision,
                 options_.strategy.grad_scaler) {
  if (options_.strategy.accumulation < 1) {
    throw Error("strategy.accumulation: must be >= 1");
  }
}

void Engine::setup(std::shared_ptr<torch::nn::Module> model,
                   std::shared_ptr<torch::optim::Optimizer> optimizer,
                   std::shared_ptr<const LrSchedule> schedule) {
  model_ = std::move(model);
  optimizer_ = std::move(optimizer);
  schedule_ = std::move(schedule);
  for (const auto& p : model_->parameters()) {
    device_ = p.device();
    break;
  }
  const std::string precision = resolve_precision(options_.strategy.precision, device_);
  if (precision != options_.strategy.precision) {
    log::info(fmt::format("strategy.precision auto: {} on {}", precision, device_.str()));
    options_.strategy.precision = precision;
    precision_ = Precision(precision, options_.strategy.grad_scaler);
  }

  // Model transforms, in a fixed order (docs/architecture.md): checkpointing first (innermost).
  if (block_lists_.empty()) {
    if (auto* m = dynamic_cast<Model*>(model_.get())) block_lists_ = m->block_lists();
  }
  const CheckpointingConfig& ckpt = options_.strategy.checkpointing;
  if (checkpointing_enabled(ckpt)) {
    if (block_lists_.empty()) {
      throw Error("strategy.checkpointing: the model names no blocks; call Engine::mark_blocks "
                  "with the module lists that hold its frugal::Unit blocks");
    }
    apply_checkpointing(*model_, ckpt, block_lists_);
  }
  const OffloadConfig& offload = options_.strategy.offload;
  // Activation offload changes what checkpointing keeps, or wraps the blocks at its layer.
  if (offload.activations) {
    activation_offload_ =
        std::make_shared<ActivationOffload>(offload.activation_prefetch, offload.pin_memory);
    apply_activation_offload(*model_, activation_offload_, block_lists_);
  }
  // Then sharding, outside checkpointing.
  if (!sharding_) sharding_ = make_sharding(options_.strategy.sharding, comm_);
  if (offload.params) sharding_->set_offload_params(offload.pin_memory);  // zero3's
  sharding_->setup(ShardingSetup{*model_, *optimizer_, block_lists_});
  // What the optimizer steps: the model's parameters, or this rank's shards of them; their
  // gradients are unscaled and clipped where they are.
  params_.clear();
  for (const auto& group : optimizer_->param_groups()) {
    params_.insert(params_.end(), group.params().begin(), group.params().end());
  }
  // Then where the update runs (offload.optimizer moves the optimizer to the host; in_backward
  // steps during backward).
  UpdateChoice choice;
  choice.offload = offload;
  choice.in_backward = options_.optimizer_in_backward;
  choice.clip_grad_norm = options_.clip_grad_norm;
  choice.loss_scaling = precision_.scaler() != nullptr;
  choice.free_gradients = !sharding_->owns_gradient_buffers();
  update_ = make_optimizer_update(choice, *optimizer_);
}

void Engine::reload_parameters() { update_->reload_from_device(); }

StateDict Engine::state_dict() {
  update_->bring_state_in();  // state kept on disk is read for the save
  const auto* update = update_.get();
  StateDict out = sharding_->state_dict(
      *model_, *optimizer_, [update](const at::Tensor& t) { return update->master_of(t); });
  out.state = precision_.state();
  return out;
}

bool Engine::load_state_dict(SavedState& saved) {
  update_->bring_state_in();  // the masters' shapes, for state the load puts beside them
  const auto* update = update_.get();
  const bool same_layout = sharding_->load_state_dict(
      saved, *model_, *optimizer_, [update](const at::Tensor& t) { return update->master_of(t); });
  precision_.load_state(saved.state());
  update_->reload_from_device();  // offloaded masters take the restored values
  return same_layout;
}

at::Tensor Engine::optimizer_param(const at::Tensor& p) const { return update_->master_of(p); }

const OptimizerOffload* Engine::offload() const {
  return dynamic_cast<const OptimizerOffload*>(update_.get());
}

StepStats Engine::step(const Batch& batch, const LossFn& loss_sum_fn) {
  run_backward(batch, loss_sum_fn, /*allow_overlap=*/true);
  return optimizer_step();
}

StepStats Engine::forward_backward(const Batch& batch, const LossFn& loss_sum_fn) {
  // Not overlapped: the caller may read or edit every gradient before the update.
  return run_backward(batch, loss_sum_fn, /*allow_overlap=*/false);
}

StepStats Engine::run_backward(const Batch& batch, const LossFn& loss_sum_fn, bool allow_overlap) {
  if (!model_ || !optimizer_) throw std::logic_error("Engine::step called before setup()");
  if (pending_.active) {
    throw Error("Engine::forward_backward: the previous step's optimizer_step() was not called");
  }
  pending_ = PendingStep{};
  pending_.start = std::chrono::steady_clock::now();
  StepStats& stats = pending_.stats;
  stats.samples = batch.size();
  stats.targets = batch.num_targets();
  // Exact integers in a double up to 2^53: the divisor is the whole job's target count.
  const double step_targets = sharding_->sum_across_ranks(static_cast<double>(stats.targets));

  // The step's learning rate, then where its update runs: it may overlap backward when
  // nothing needs every gradient before it (no clipping, no loss scaling, no caller reading
  // them), each parameter updated as soon as its gradient is final.
  stats.lr = set_step_learning_rate();
  const bool overlap =
      update_->begin_step(*optimizer_, allow_overlap && options_.clip_grad_norm <= 0.0 &&
                                           precision_.scaler() == nullptr);

  // 1. Forward (under the precision's autocast) and backward over the micro-batches;
  //    gradients accumulate in .grad.
  at::Tensor loss_sum;  // summed on the device: one host sync per step, not one per micro-step
  const std::vector<Batch> micro_batches = split_batch(batch, options_.strategy.accumulation);
  const auto k = static_cast<int64_t>(micro_batches.size());
  for (int64_t i = 0; i < k; ++i) {
    const Batch& micro = micro_batches[i];
    trace::Range micro_range(trace::names_wanted() ? fmt::format("micro_step {}", i) : "");
    sharding_->begin_micro_step(i, k);
    if (overlap && i == k - 1) {
      std::weak_ptr<OptimizerUpdate> weak = update_;
      sharding_->notify_final_gradients([weak](const std::vector<at::Tensor>& params) {
        if (auto update = weak.lock()) update->ready(params);
      });
    }
    at::Tensor loss;
    {
      trace::Range forward("forward", trace::Phase::forward);
      auto autocast = precision_.autocast(device_.type());
      loss = loss_sum_fn(micro) / step_targets;
    }
    if (!adapters_checked_) {  // an adapter the model's forward skipped is an error, once
      check_lora_used(*model_);
      adapters_checked_ = true;
    }
    // Test hooks only (FRUGAL_FAULT_ABORT, FRUGAL_FAULT_HANG): a rank dying or stuck mid-step.
    if (i == 0) dist::detail::step_fault_point(comm_ ? comm_->rank() : 0, steps_done_ + 1);
    {
      trace::Range backward("backward", trace::Phase::backward);
      precision_.scale_loss(loss).backward();
    }
    loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
  }
  {
    // Waiting for the last reductions (their wait is comm_wait) is backward's tail.
    trace::Range finish("finish_gradients", trace::Phase::backward);
    sharding_->finish_gradients();
  }
  stats.loss = sharding_->sum_across_ranks(loss_sum.item<double>());

  // 2. Unscale once (fp16). Sharded ranks see different gradients: they agree on one verdict
  //    (and the scaler too).
  trace::Range unscale("unscale", trace::Phase::optimizer);
  pending_.found_inf = sharding_->any_across_ranks(precision_.unscale(params_));
  precision_.set_found_inf(pending_.found_inf);
  pending_.active = true;
  return stats;
}

std::string first_nonfinite_gradient(const torch::nn::Module& model) {
  for (const auto& p : model.named_parameters()) {
    const at::Tensor& g = p.value().grad();
    if (g.defined() && !at::isfinite(g).all().item<bool>()) return p.key();
  }
  return "";
}

double Engine::set_step_learning_rate() {
  const double lr = schedule_ ? schedule_->lr_at(steps_done_)
                              : optimizer_->param_groups().front().options().get_lr();
  if (schedule_) set_learning_rate(*optimizer_, lr);
  return lr;
}

StepStats Engine::optimizer_step() {
  if (!pending_.active) {
    throw Error("Engine::optimizer_step: call forward_backward() first (or step() for both)");
  }
  pending_.active = false;
  StepStats& stats = pending_.stats;
  std::optional<trace::Range> optimizer_range(std::in_place, "optimizer", trace::Phase::optimizer);

  // 3. The global gradient norm (with what an update during backward freed) and clipping.
  {
    trace::Range norm("grad_norm");
    stats.grad_norm = std::sqrt(sharding_->grad_norm_squared(params_).item<double>() +
                                update_->freed_grad_norm_squared());
  }
  const bool finite = !pending_.found_inf && std::isfinite(stats.grad_norm);
  stats.pipelined = update_->overlapping();
  if (!finite) stats.nonfinite_gradient = first_nonfinite_gradient(*model_);
  // Clipping (never with an update during backward): frugal's fused Adam(W) multiplies the
  // gradients inside its update (one pass over them fewer, which is what the host step of
  // offload is bound by); any other optimizer gets them scaled first.
  const double clip_factor = finite && options_.clip_grad_norm > 0.0
                                 ? clip_coefficient(stats.grad_norm, options_.clip_grad_norm)
                                 : 1.0;
  auto* factor_in_step =
      clip_factor < 1.0 ? dynamic_cast<GradientFactorInStep*>(optimizer_.get()) : nullptr;
  if (factor_in_step) {
    factor_in_step->set_gradient_factor(clip_factor);
  } else if (clip_factor < 1.0) {
    trace::Range clip("clip");
    clip_grads(params_, stats.grad_norm, options_.clip_grad_norm);
  }

  // 4. The update; a step with non-finite gradients is skipped (fp16: the scaler backs off).
  OptimizerUpdate::Outcome outcome;
  {
    trace::Range update("update");
    outcome = update_->finish_step(*optimizer_, finite);
  }
  stats.skipped = outcome.skipped;
  if (factor_in_step) factor_in_step->set_gradient_factor(1.0);
  sharding_->after_optimizer_step(outcome.parameters_changed);
  precision_.update();
  sharding_->zero_grad(*optimizer_);
  update_->zero_device_grads(/*set_to_none=*/!sharding_->owns_gradient_buffers());
  ++steps_done_;
  optimizer_range.reset();

  stats.step = steps_done_;
  stats.loss_scale = precision_.loss_scale();
  if (activation_offload_) {
    stats.activation_host_peak_bytes = activation_offload_->stats().host_peak_bytes;
    activation_offload_->reset_peak();
  }
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_.start).count();
  stats.phases = trace::take_phase_times();
  return stats;
}

}  // namespace frugal
