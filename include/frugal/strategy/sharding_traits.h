// What a sharding mode does to the training state, as facts code can reason about without
// building the strategy (it needs a communicator) or knowing the mode's name: the memory
// planner and the out-of-memory advice ask these instead of comparing names, so a registered
// mode is planned and advised on like the built-in one it resembles.
//
//   mode   data_parallel  shards_optimizer_state  shards_gradients  shards_parameters
//   none
//   ddp    x
//   zero1  x              x
//   zero2  x              x                       x
//   zero3  x              x                       x                 x
//   hsdp   x              x                       x                 x   (+ replicated_groups)
#pragma once

#include <optional>
#include <string>

namespace frugal {

struct ShardingTraits {
  bool data_parallel = false;           // the ranks train one model on different data
  bool shards_optimizer_state = false;  // each rank keeps 1/N of the optimizer state (ZeRO-1)
  bool shards_gradients = false;        // and 1/N of the gradients, once reduced (ZeRO-2)
  bool shards_parameters = false;       // and 1/N of the parameters between uses (ZeRO-3)
  // The shards are cut within groups of strategy.sharding.shard_size ranks (N above is the
  // group's size) and each group holds them all: gradients are summed across the groups (hsdp).
  bool replicated_groups = false;
};

// Bytes each rank sends per optimizer step for a model of `model_bytes` (the gradients'
// dtype) under a mode with these traits, at `world` ranks in shard groups of `group` (the
// world but under replicated_groups), by the ring algorithm: data parallel without sharded
// state all-reduces the gradients, 2(N-1)/N x the model; zero1/2 reduce-scatter them and
// all-gather the parameters, the same; sharded parameters are gathered again for backward,
// 3(N-1)/N. Replicated groups: that within the group, plus the gradient shards (1/n of the
// model) all-reduced across the R = world/n groups, 2(R-1)/R x model/n.
struct StepTraffic {
  double within = 0;  // inside a shard group (all of it, without groups)
  double across = 0;  // between groups
  double total() const { return within + across; }
};
StepTraffic step_traffic(const ShardingTraits& traits, double model_bytes, int world, int group);

// The traits of a built-in or registered mode (engine/sharding_registry.h), none for a name
// that is not one: for code that checks a config before anything runs.
std::optional<ShardingTraits> find_sharding_traits(const std::string& mode);

}  // namespace frugal
