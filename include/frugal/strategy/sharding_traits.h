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
#pragma once

#include <optional>
#include <string>

namespace frugal {

struct ShardingTraits {
  bool data_parallel = false;           // the ranks train one model on different data
  bool shards_optimizer_state = false;  // each rank keeps 1/N of the optimizer state (ZeRO-1)
  bool shards_gradients = false;        // and 1/N of the gradients, once reduced (ZeRO-2)
  bool shards_parameters = false;       // and 1/N of the parameters between uses (ZeRO-3)
};

// The traits of a built-in or registered mode (engine/sharding_registry.h), none for a name
// that is not one: for code that checks a config before anything runs.
std::optional<ShardingTraits> find_sharding_traits(const std::string& mode);

}  // namespace frugal
