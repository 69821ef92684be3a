// ZeroSharding's state between its calls, shared with the autograd hooks and the zero3 block
// wrappers (which hold it weakly). Its jobs live in their own files:
//   zero_units.cpp    unit planning: which parameters form which unit's flat buffers
//   zero_gather.cpp   zero3's gather / prefetch / release around each unit, and the
//                     reduce-scatters launched as units finish their backward
//   zero_reshard.cpp  loading a state saved under another layout, cut again for this one
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flat_param.h"
#include "frugal/config/config.h"
#include "frugal/models/blocks.h"
#include "frugal/strategy/sharding.h"
#include "frugal/strategy/state_dict.h"
#include "gradient_reduction.h"

namespace frugal::dist {

struct ShardUnit {
  std::string name;
  std::vector<size_t> flats;
  int64_t params = 0;      // trained parameters in it
  int64_t ready = 0;       // of them, with their gradient in this backward
  // zero3 with frozen parameters in the unit: their backward (the input's gradient through a
  // frozen weight) may run after every trained parameter's gradient is in, so the unit is
  // released only once its input's gradient is too (a hook on the input, set at forward).
  bool has_frozen = false;
  bool input_pending = false;
  int64_t full_bytes = 0;  // its whole parameters, gathered
  bool gathered = false;   // whole parameters present (or being gathered)
};

// A unit wrapping blocks of the model (zero3 gathers around them).
struct WrappedUnit {
  size_t unit = 0;
  std::vector<Block> blocks;
};

struct ZeroState : GradientReduction {
  // `comm` (GradientReduction's) is the group the flats are sharded over: the job, or hsdp's
  // shard group; `replicas` (hsdp) the ranks holding the same shards in the other groups,
  // over which the reduced gradient shards are summed.
  std::shared_ptr<Communicator> replicas;
  int stage = 3;
  int64_t prefetch = 1;
  bool accumulate_sharded = true;
  std::vector<FlatParam> flats;
  std::vector<ShardUnit> units;       // forward order: the block units, then the root unit
  size_t block_units = 0;             // units[0, block_units) wrap blocks
  std::vector<size_t> launch_order;   // backward order: last block first, the root last
  std::vector<size_t> unit_of_param;  // per hooked parameter
  bool pinned_full = false;           // set_full_parameters(true)
  int64_t gathered_bytes = 0;
  int64_t peak_gathered = 0;

  std::string mode() const { return "zero" + std::to_string(stage); }

  // zero_gather.cpp
  void gather(size_t u, bool async);
  void wait(size_t u);
  // zero3: frees the unit's whole parameters (they stay for zero1/2, and while pinned).
  void release(size_t u);
  // Starts gathering the next `prefetch` block units in `direction` (+1 forward, -1 backward).
  void prefetch_from(size_t u, int direction);
  void ensure_gathered(size_t u);
  // Reduce-scatters complete units in launch order; `force`: all remaining ones (end of
  // backward).
  void launch_in_order(bool force);
  // Finishes a unit's reduce-scatters; its shards' gradients are then final.
  std::vector<at::Tensor> finish_unit(size_t u);
  void on_gradient(size_t index);
  // The gradient of a unit's input is in: all of its backward has run.
  void after_input_gradient(size_t u);
  // Releases a unit whose backward is over (every trained gradient in, no input pending).
  void release_if_backward_done(size_t u);
  // Before a unit's backward (a hook on its output's gradient): its parameters again.
  void before_backward(size_t u);
  // After each micro-step's backward: reductions finished and added to the shards' gradients,
  // parameters not needed any more freed, counters reset.
  void end_backward();
};

// zero_units.cpp: builds the units and their flat buffers from the model's blocks (one each,
// or merged up to unit_mb) and the root unit with the rest, then points the optimizer's
// groups at the shards. Returns the units that wrap blocks.
std::vector<WrappedUnit> plan_units(ZeroState& s, const ShardingSetup& setup,
                                    const ShardingConfig& cfg,
                                    const std::optional<at::TensorOptions>& shard_on_host);

// zero_gather.cpp: the hook after each parameter's gradient accumulation, and (zero3) the
// wrappers that gather each unit around its blocks' forward and backward.
void hook_gradients(const std::shared_ptr<ZeroState>& state);
void install_gather_wrappers(const std::shared_ptr<ZeroState>& state,
                             const std::vector<WrappedUnit>& wrapped);

// zero_reshard.cpp: puts one flat buffer's saved kinds ("param", "exp_avg", ...) back.
using RestoreFlat = std::function<void(FlatParam&, std::map<std::string, at::Tensor>)>;
// Every flat buffer's values from a state saved under another layout, by parameter name,
// reading only this rank's slice; a unit at a time. Logs what it read.
void load_resharded(ZeroState& s, SavedState& saved, int rank, const RestoreFlat& restore);

}  // namespace frugal::dist
