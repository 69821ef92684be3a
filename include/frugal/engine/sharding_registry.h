// Sharding strategies by name (strategy.sharding.mode): the built-in `none`, `ddp`, `zero1`,
// `zero2` and `zero3`, and any a user registers. A factory gets the sharding config and the
// job's communicator (null in a single process without one); each mode also has traits (what
// it shards), which the planner and the out-of-memory advice read instead of its name.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/distributed/communicator.h"
#include "frugal/strategy/sharding.h"
#include "frugal/strategy/sharding_traits.h"

namespace frugal {

using ShardingFactory = std::function<std::shared_ptr<Sharding>(
    const ShardingConfig& cfg, std::shared_ptr<dist::Communicator> comm)>;

// Registers `name` with what it shards (all false, as for `none`, unless given); call before
// the engine is set up. A name already taken (built in or registered) is a frugal::Error.
void register_sharding(const std::string& name, ShardingFactory factory,
                       const ShardingTraits& traits = {});
std::vector<std::string> sharding_names();
// The traits `mode` was registered with; an unknown mode is a frugal::Error like
// make_sharding's.
ShardingTraits sharding_traits(const std::string& mode);
// An unknown name is a frugal::Error with a did-you-mean and the known names.
std::shared_ptr<Sharding> make_sharding(const ShardingConfig& cfg,
                                        std::shared_ptr<dist::Communicator> comm);

}  // namespace frugal
