// Sharding strategies by name (strategy.sharding.mode): the built-in `none` and `ddp`, and any
// a user registers. A factory gets the sharding config and the job's communicator (null in a
// single process without one).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/distributed/communicator.h"
#include "frugal/strategy/sharding.h"

namespace frugal {

using ShardingFactory = std::function<std::shared_ptr<Sharding>(
    const ShardingConfig& cfg, std::shared_ptr<dist::Communicator> comm)>;

// Registers (or replaces) `name`; call before the engine is set up.
void register_sharding(const std::string& name, ShardingFactory factory);
std::vector<std::string> sharding_names();
// An unknown name is a frugal::Error with a did-you-mean and the known names.
std::shared_ptr<Sharding> make_sharding(const ShardingConfig& cfg,
                                        std::shared_ptr<dist::Communicator> comm);

}  // namespace frugal
