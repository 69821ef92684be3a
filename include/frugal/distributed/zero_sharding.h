// Fully sharded data parallelism (strategy.sharding.mode: zero1 | zero2 | zero3), after ZeRO
// and PyTorch's FSDP2, on c10d collectives:
//
//   zero1  optimizer state sharded: each rank steps its 1/N slice of every parameter;
//          gradients stay whole (reduce-scattered once per step), parameters are all-gathered
//          after the step.                                  traffic per step: 2Ψ (ring)
//   zero2  + gradients sharded: each unit's gradients are reduce-scattered as soon as its
//          backward is done, and the whole ones released.   traffic per step: 2Ψ
//   zero3  + parameters sharded: a unit's parameters are all-gathered before its forward,
//          freed after it, gathered again before its backward (the next unit's gather is
//          prefetched), freed once its gradients are reduce-scattered.
//                                                          traffic per step: 3Ψ
//
// Units (wrap policy): one per block of the model's block lists (wrap: block), or consecutive
// blocks merged up to unit_mb (wrap: size); every other parameter belongs to the root unit,
// gathered from the start of each forward to the end of its backward. Each unit's parameters
// of one optimizer group (weight decay or not) are flattened into one buffer, padded and
// split evenly (distributed/flat_param.h); the optimizer's parameter groups get the shards.
// zero3 shards the frozen parameters too (LoRA's base, model.freeze): their own flat buffers,
// gathered and released with their unit, with no gradient, state or checkpoint entry; NF4
// weights are buffers, not parameters, and stay whole.
//
// Mixed precision: param_dtype is the dtype the parameters are gathered and computed in,
// reduce_dtype the one gradients are summed in; shards and optimizer state keep the
// parameters' own dtype (fp32 master weights). Gradient clipping uses the norm over all
// shards; fp16's overflow check is agreed by all ranks.
#pragma once

#include <c10/core/ScalarType.h>

#include <functional>
#include <memory>
#include <optional>

#include "frugal/config/config.h"
#include "frugal/distributed/rank_sharding.h"
#include "frugal/distributed/sharded_state.h"

namespace frugal::dist {

struct ZeroState;

class ZeroSharding final : public RankSharding {
 public:
  // cfg.mode: zero1, zero2 or zero3.
  ZeroSharding(std::shared_ptr<Communicator> comm, const ShardingConfig& cfg);
  ~ZeroSharding() override;

  std::string name() const override;
  int stage() const { return stage_; }
  // strategy.offload.params (zero3): shards, their gradients and the optimizer's state in
  // host memory (pinned when asked and CUDA is present); each unit's shard is copied to the
  // device for its all-gather only. Call before setup().
  void set_offload_params(bool pin_memory) override;
  void setup(const ShardingSetup& setup) override;
  void begin_micro_step(int64_t index, int64_t count) override;
  void finish_gradients() override;
  bool any_across_ranks(bool local) override;
  at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params) override;
  void after_optimizer_step(bool stepped) override;
  void zero_grad(torch::optim::Optimizer& optimizer) override;
  void set_full_parameters(bool full) override;

  // Sharded checkpoints (distributed/sharded_state.h): each rank saves its shards of the
  // parameters and of their optimizer state ("<flat>/<kind>", on the CPU) with the layout of
  // its flat buffers; the rest of the model (buffers) is saved whole, frozen parameters not
  // at all (they come from where the model was built from). A
  // state saved under the same layout comes back as it was, bit for bit; any other (whole, or
  // another world size, zero mode or wrap policy) is cut again from whole tensors by
  // parameter name.
  StateDict state_dict(const torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                       const StateHolder& holder) const override;
  bool load_state_dict(SavedState& saved, torch::nn::Module& model,
                       torch::optim::Optimizer& optimizer, const StateHolder& holder) override;
  ShardLayout layout() const;

  // The group the parameters are sharded over (the job; hsdp: this rank's shard group), and
  // hsdp's replica group (null otherwise, or with one group).
  const std::shared_ptr<Communicator>& shard_group() const;
  const std::shared_ptr<Communicator>& replica_group() const;
  // Figures for tests and benchmarks.
  int64_t unit_count() const;
  // Bytes of the model's state this rank holds between steps: shards (frozen ones included),
  // their gradients, whole parameters kept (zero1/2) and whole gradients kept (zero1).
  int64_t sharded_state_bytes() const;
  // The most whole-parameter bytes gathered at once during the last step (zero3).
  int64_t peak_gathered_bytes() const;

 private:
  GradientReduction& reduction() override;
  // hsdp: the shard and replica groups from strategy.sharding.shard_size.
  void make_hsdp_groups();
  ShardingConfig cfg_;
  int stage_;
  std::optional<at::TensorOptions> offload_params_;
  std::shared_ptr<ZeroState> state_;  // shared: autograd hooks and unit wrappers hold it weakly
};

// The dtype named by strategy.sharding.param_dtype / reduce_dtype ("auto": none).
std::optional<c10::ScalarType> sharding_dtype(const std::string& name);

}  // namespace frugal::dist
