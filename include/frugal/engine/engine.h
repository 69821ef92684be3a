// The composition point: one optimizer step over a batch, readable top to bottom
// (docs/architecture.md, "The step"). The batch is split into `accumulation` micro-batches;
// each micro-batch's loss *sum* is divided by the target count of the whole step, so the
// gradients equal those of one large batch whatever the accumulation.
//
//   step_targets = sharding.sum_across_ranks(targets of this rank's batch)
//   lr = schedule(step); update.begin_step(overlap allowed: no clipping, no loss scaling,
//     no caller reading the gradients)
//   for each micro-batch i of k:
//     sharding.begin_micro_step(i, k)                                 (DDP: sync on the last)
//     { autocast scope: loss = loss_sum_fn(micro) / step_targets }   precision
//     precision.scale_loss(loss).backward()                            (fp16: GradScaler)
//   sharding.finish_gradients()                                        wait for reductions
//   found_inf = precision.unscale(grads)                               once, before clipping
//   ---- forward_backward() ends here; optimizer_step() starts: gradients final ----
//   norm = global grad norm (sharding-aware, with what the update freed); clip if configured
//   update.finish_step(finite): optimizer.step() unless found_inf / non-finite
//     (the OptimizerUpdate decides where it runs: offload.optimizer's gradients to the host,
//     the step there, parameters back; optim.in_backward's and offload's overlapping steps
//     update each parameter (or zero unit) as soon as its gradient is final, while backward
//     goes on, and finish the rest here)
//   sharding.after_optimizer_step(); precision.update(); sharding.zero_grad()
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/data/batch.h"
#include "frugal/distributed/communicator.h"
#include "frugal/optim/schedule.h"
#include "frugal/strategy/optimizer_update.h"
#include "frugal/strategy/precision.h"
#include "frugal/strategy/sharding.h"
#include "frugal/strategy/state_dict.h"
#include "frugal/util/trace.h"

namespace frugal {

class OptimizerOffload;
class ActivationOffload;

// Returns the SUM of per-target losses of one micro-batch (e.g. frugal::cross_entropy_sum).
using LossFn = std::function<at::Tensor(const Batch& micro_batch)>;

struct StepStats {
  int64_t step = 0;       // optimizer steps done after this one
  double loss = 0.0;      // mean loss per target over the whole step
  double grad_norm = 0.0; // global L2 norm before clipping
  double lr = 0.0;        // learning rate this step used
  int64_t samples = 0;
  int64_t targets = 0;
  bool skipped = false;   // optimizer step skipped (e.g. non-finite gradients)
  double seconds = 0.0;   // wall time of the step
  double loss_scale = 1.0;  // fp16-mixed: the scale after this step's update
  // Seconds per phase since the previous step's end (util/trace.h): the data wait before this
  // step when the caller wraps its fetch in a data_wait range, then forward, backward,
  // communication waits and the optimizer, which partition the rest of `seconds`.
  trace::PhaseTimes phases;
  // A step with non-finite gradients: the first parameter (in the model's order) whose gradient
  // is not finite, when gradients sit on the model's parameters (not under zero2/3's flat
  // shards); empty otherwise.
  std::string nonfinite_gradient;
  bool pipelined = false;  // the update ran during backward (it could not be skipped)
  // strategy.offload.activations: the host copies' peak bytes during this step (-1: off).
  int64_t activation_host_peak_bytes = -1;
};

// The first parameter of `model`, in its order, whose gradient holds an inf or NaN ("" if
// none): where a non-finite step is reported.
std::string first_nonfinite_gradient(const torch::nn::Module& model);

struct EngineOptions {
  StrategyConfig strategy;
  double clip_grad_norm = 0.0;  // 0 = no clipping
  // optim.in_backward: each parameter stepped, and its gradient freed, as soon as the gradient
  // is final (strategy/in_backward_update.h); needs no clipping and no fp16 loss scaling.
  bool optimizer_in_backward = false;
};

class Engine {
 public:
  // `comm`: the job's process group (frugal::dist::init_from_env), needed by sharding modes
  // other than none; null for a single process.
  explicit Engine(EngineOptions options, std::shared_ptr<dist::Communicator> comm = nullptr);

  // Hands in a sharding strategy built in code, instead of strategy.sharding.mode's; call
  // before setup().
  void set_sharding(std::shared_ptr<Sharding> sharding) { sharding_ = std::move(sharding); }

  // Names the module lists whose elements are the model's blocks (frugal::Unit), the units
  // that checkpointing (and later sharding) wrap. frugal::Model subclasses say so themselves
  // (Model::block_lists); call this before setup() for any other module.
  void mark_blocks(std::vector<std::string> block_lists) { block_lists_ = std::move(block_lists); }

  // Takes the model and its optimizer (and optionally a schedule: without one the
  // optimizer's own learning rate is used), and applies the model transforms in their fixed
  // order: checkpointing wraps blocks (sharding will wrap units outside it). Call once,
  // before step().
  void setup(std::shared_ptr<torch::nn::Module> model,
             std::shared_ptr<torch::optim::Optimizer> optimizer,
             std::shared_ptr<const LrSchedule> schedule = nullptr);

  // One optimizer step over `batch` (split into strategy.accumulation micro-batches):
  // forward_backward() then optimizer_step().
  StepStats step(const Batch& batch, const LossFn& loss_sum_fn);
  // The step in two halves, for loops of your own: between them every gradient is final
  // (summed over micro-batches, reduced across ranks, divided by the job's target count,
  // unscaled under fp16-mixed) and may be read or edited. They sit on the tensors the
  // optimizer steps (engine.optimizer()'s parameters: under zero1/2/3 this rank's shards, in
  // the model's parameters' .grad otherwise; offload copies them to the host in
  // optimizer_step). Returns the loss, samples and targets; optimizer_step returns the rest.
  // (step() may overlap the offloaded host step with backward; these two never do.)
  StepStats forward_backward(const Batch& batch, const LossFn& loss_sum_fn);
  // The global gradient norm, clipping, the update (skipped when gradients are not finite),
  // the loss scale's update and zeroing the gradients.
  StepStats optimizer_step();

  int64_t steps_done() const { return steps_done_; }
  void set_steps_done(int64_t steps) { steps_done_ = steps; }
  torch::nn::Module& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const EngineOptions& options() const { return options_; }
  Precision& precision() { return precision_; }
  Sharding& sharding() { return *sharding_; }
  // Rank 0 of the job, or the only process: the one that logs and writes shared files.
  bool is_main() const { return !comm_ || comm_->is_main(); }
  const std::shared_ptr<dist::Communicator>& communicator() const { return comm_; }
  // The device the model's parameters are on (autocast's device type).
  c10::Device device() const { return device_; }
  // Checkpoints, the same for every strategy (strategy/state_dict.h): what this rank holds
  // of the training state (the sharding's part and the loss scaler's), and the state back
  // from a checkpoint written under any layout. load_state_dict returns true when it came
  // back in the layout it was saved in (a rank's random generators may then follow).
  // state_dict's CPU tensors share the live state's memory (a save holds no second copy):
  // clone what must outlive the next step.
  StateDict state_dict();
  bool load_state_dict(SavedState& saved);
  // After parameters were written outside step() (a resume): offloaded masters follow.
  void reload_parameters();
  // The tensor the optimizer steps for `p` (a model parameter or a shard): p itself, or its
  // host master under strategy.offload.optimizer. Optimizer state is kept under it.
  at::Tensor optimizer_param(const at::Tensor& p) const;
  // strategy.offload.optimizer's step object, for its figures (null when not offloading).
  const OptimizerOffload* offload() const;
  // The step object in use (the plain update, offload's, or optim.in_backward's), after setup.
  const OptimizerUpdate* update() const { return update_.get(); }
  OptimizerUpdate* update() { return update_.get(); }
  // strategy.offload.activations' offloader, for its figures (null when off).
  const ActivationOffload* activation_offload() const { return activation_offload_.get(); }

 private:
  StepStats run_backward(const Batch& batch, const LossFn& loss_sum_fn, bool allow_overlap);
  double set_step_learning_rate();  // this step's rate from the schedule (or the optimizer's)

  // Between forward_backward and optimizer_step.
  struct PendingStep {
    bool active = false;
    bool found_inf = false;
    StepStats stats;
    std::chrono::steady_clock::time_point start;
  };
  PendingStep pending_;

  EngineOptions options_;
  Precision precision_;
  c10::Device device_{c10::kCPU};
  std::shared_ptr<dist::Communicator> comm_;
  std::shared_ptr<Sharding> sharding_;
  std::shared_ptr<OptimizerUpdate> update_;  // where and when the update runs
  std::shared_ptr<ActivationOffload> activation_offload_;
  std::shared_ptr<torch::nn::Module> model_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<const LrSchedule> schedule_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> block_lists_;
  int64_t steps_done_ = 0;
  bool adapters_checked_ = false;  // check_lora_used after the first forward
};

// Splits a batch into k micro-batches along dim 0 (sizes differ by at most one).
std::vector<Batch> split_batch(const Batch& batch, int64_t k);

}  // namespace frugal
