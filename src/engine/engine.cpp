#include "frugal/engine/engine.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <chrono>
#include <cmath>

#include "frugal/distributed/zero_sharding.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/models/model.h"
#include "frugal/optim/clip.h"
#include "frugal/optim/fused_adam.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/util/error.h"

namespace frugal {

std::vector<Batch> split_batch(const Batch& batch, int64_t k) {
  if (k < 1 || batch.size() < k) {
    throw Error("strategy.accumulation: cannot split a batch of " + std::to_string(batch.size()) +
                " samples into " + std::to_string(k) + " micro-batches");
  }
  if (k == 1) return {batch};
  auto xs = batch.x.tensor_split(k, 0);
  auto ys = batch.y.tensor_split(k, 0);
  std::vector<Batch> out;
  out.reserve(k);
  for (int64_t i = 0; i < k; ++i) out.push_back(Batch{xs[i], ys[i]});
  return out;
}

Engine::Engine(EngineOptions options, std::shared_ptr<dist::Communicator> comm)
    : options_(std::move(options)),
      comm_(std::move(comm)),
      precision_(options_.strategy.precision, options_.strategy.grad_scaler) {
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

  // Model transforms, in a fixed order (docs/architecture.md): checkpointing first (innermost).
  if (block_lists_.empty()) {
    if (auto* m = dynamic_cast<Model*>(model_.get())) block_lists_ = m->block_lists();
  }
  const CheckpointingConfig& ckpt = options_.strategy.checkpointing;
  if (ckpt.policy != "none") {
    if (block_lists_.empty()) {
      throw Error("strategy.checkpointing: the model names no blocks; call Engine::mark_blocks "
                  "with the module lists that hold its frugal::Unit blocks");
    }
    apply_checkpointing(*model_, ckpt, block_lists_);
  }
  // Then sharding, outside checkpointing.
  if (!sharding_) sharding_ = make_sharding(options_.strategy.sharding, comm_);
  const OffloadConfig& offload = options_.strategy.offload;
  if (offload.params) {
    auto* zero = dynamic_cast<dist::ZeroSharding*>(sharding_.get());
    if (zero == nullptr || zero->stage() != 3) {
      throw Error("strategy.offload.params: needs strategy.sharding.mode zero3");
    }
    zero->set_offload_params(offload.pin_memory);
  }
  sharding_->setup(ShardingSetup{*model_, *optimizer_, block_lists_});
  // What the optimizer steps: the model's parameters, or this rank's shards of them; their
  // gradients are unscaled and clipped where they are.
  params_.clear();
  for (const auto& group : optimizer_->param_groups()) {
    params_.insert(params_.end(), group.params().begin(), group.params().end());
  }
  // Then the optimizer moves to the host (offload.params already keeps its shards there).
  if (offload.optimizer && !offload.params) {
    offload_ = std::make_shared<OptimizerOffload>(*optimizer_, offload.pin_memory);
    if (!sharding_->reduces_gradients()) watch_gradients_for_pipeline();
  }
}

struct Engine::PipelineHooks {
  std::atomic<bool> armed{false};
  std::weak_ptr<OptimizerOffload> offload;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // keep the hooks alive
};

void Engine::watch_gradients_for_pipeline() {
  pipeline_hooks_ = std::make_shared<PipelineHooks>();
  pipeline_hooks_->offload = offload_;
  std::weak_ptr<PipelineHooks> weak = pipeline_hooks_;
  for (const at::Tensor& p : params_) {
    if (!p.requires_grad()) continue;
    auto acc = torch::autograd::impl::grad_accumulator(p);
    at::Tensor param = p;
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, param](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
          auto hooks = weak.lock();
          if (hooks && hooks->armed.load()) {
            if (auto offload = hooks->offload.lock()) offload->ready({param});
          }
          return outputs;
        }));
    pipeline_hooks_->accumulators.push_back(std::move(acc));
  }
}

void Engine::reload_parameters() {
  if (offload_) offload_->reload_from_device();
}

at::Tensor Engine::optimizer_param(const at::Tensor& p) const {
  return offload_ ? offload_->master_of(p) : p;
}

StepStats Engine::step(const Batch& batch, const LossFn& loss_sum_fn) {
  run_backward(batch, loss_sum_fn, /*allow_pipeline=*/true);
  return optimizer_step();
}

StepStats Engine::forward_backward(const Batch& batch, const LossFn& loss_sum_fn) {
  // Not pipelined: the caller may read or edit every gradient before the update.
  return run_backward(batch, loss_sum_fn, /*allow_pipeline=*/false);
}

StepStats Engine::run_backward(const Batch& batch, const LossFn& loss_sum_fn, bool allow_pipeline) {
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

  // Offload's pipeline: nothing needs every gradient before the step (no clipping, no loss
  // scaling, no caller reading them), so the host steps each parameter as soon as its
  // gradient is final. The learning rate is set first.
  const bool pipelined = allow_pipeline && offload_ && options_.clip_grad_norm <= 0.0 &&
                         precision_.scaler() == nullptr;
  pending_.pipelined = pipelined;
  if (pipelined) {
    stats.lr = set_step_learning_rate();
    offload_->begin_pipeline(*optimizer_);
  }

  // 1. Forward (under the precision's autocast) and backward over the micro-batches;
  //    gradients accumulate in .grad.
  at::Tensor loss_sum;  // summed on the device: one host sync per step, not one per micro-step
  const std::vector<Batch> micro_batches = split_batch(batch, options_.strategy.accumulation);
  const auto k = static_cast<int64_t>(micro_batches.size());
  for (int64_t i = 0; i < k; ++i) {
    const Batch& micro = micro_batches[i];
    sharding_->begin_micro_step(i, k);
    if (pipelined && i == k - 1) {
      if (pipeline_hooks_) {
        pipeline_hooks_->armed = true;
      } else {
        std::weak_ptr<OptimizerOffload> weak = offload_;
        sharding_->notify_final_gradients([weak](const std::vector<at::Tensor>& params) {
          if (auto offload = weak.lock()) offload->ready(params);
        });
      }
    }
    at::Tensor loss;
    {
      auto autocast = precision_.autocast(device_.type());
      loss = loss_sum_fn(micro) / step_targets;
    }
    precision_.scale_loss(loss).backward();
    loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
  }
  sharding_->finish_gradients();
  if (pipeline_hooks_) pipeline_hooks_->armed = false;
  stats.loss = sharding_->sum_across_ranks(loss_sum.item<double>());

  // 2. Unscale once (fp16). Sharded ranks see different gradients: they agree on one verdict
  //    (and the scaler too).
  pending_.found_inf = sharding_->any_across_ranks(precision_.unscale(params_));
  precision_.set_found_inf(pending_.found_inf);
  pending_.active = true;
  return stats;
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
  const bool pipelined = pending_.pipelined;

  // 3. The global gradient norm and clipping.
  stats.grad_norm = std::sqrt(sharding_->grad_norm_squared(params_).item<double>());
  const bool finite = !pending_.found_inf && std::isfinite(stats.grad_norm);
  // Clipping: frugal's fused Adam(W) multiplies the gradients inside its update (one pass
  // over them fewer, which is what the host step of offload is bound by); any other
  // optimizer gets them scaled first.
  // (Not under the pipeline: its host thread may be stepping now, and nothing clips there.)
  auto* factor_in_step =
      pipelined ? nullptr : dynamic_cast<GradientFactorInStep*>(optimizer_.get());
  const double clip_factor = finite && options_.clip_grad_norm > 0.0
                                 ? clip_coefficient(stats.grad_norm, options_.clip_grad_norm)
                                 : 1.0;
  if (factor_in_step) {
    factor_in_step->set_gradient_factor(clip_factor);
  } else if (clip_factor < 1.0) {
    clip_grads(params_, stats.grad_norm, options_.clip_grad_norm);
  }

  // 4. The update; a step with non-finite gradients is skipped (fp16: the scaler backs off).
  if (!pipelined) stats.lr = set_step_learning_rate();
  if (pipelined) {
    // Waits for the host thread and steps what it was not handed. Non-finite gradients
    // cannot be skipped here: their parameters may have been stepped during backward.
    offload_->finish_pipeline();
    stats.skipped = !finite;
  } else if (finite) {
    if (offload_) {
      offload_->step(*optimizer_);
    } else {
      optimizer_->step();
    }
  } else {
    stats.skipped = true;
  }
  if (factor_in_step) factor_in_step->set_gradient_factor(1.0);
  sharding_->after_optimizer_step(finite || pipelined);
  precision_.update();
  sharding_->zero_grad(*optimizer_);
  if (offload_) offload_->zero_device_grads(/*set_to_none=*/!sharding_->owns_gradient_buffers());
  ++steps_done_;

  stats.step = steps_done_;
  stats.loss_scale = precision_.loss_scale();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_.start).count();
  return stats;
}

}  // namespace frugal
