#include "frugal/engine/sharding_registry.h"

#include <fmt/format.h>

#include "frugal/config/named_registry.h"
#include "frugal/distributed/ddp.h"
#include "frugal/distributed/zero_sharding.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

std::shared_ptr<dist::Communicator> need_comm(const ShardingConfig& cfg,
                                              std::shared_ptr<dist::Communicator> comm) {
  if (!comm) {
    throw Error(fmt::format("strategy.sharding.mode: {} needs the job's communicator: pass "
                            "frugal::dist::init_from_env(cfg.distributed) to the Engine",
                            cfg.mode));
  }
  return comm;
}

std::shared_ptr<Sharding> make_zero(const ShardingConfig& cfg,
                                    std::shared_ptr<dist::Communicator> comm) {
  return std::make_shared<dist::ZeroSharding>(need_comm(cfg, std::move(comm)), cfg);
}

NamedRegistry<ShardingFactory>& registry() {
  static NamedRegistry<ShardingFactory> factories(
      "strategy.sharding.mode", "mode",
      {
          {"none",
           [](const ShardingConfig&, std::shared_ptr<dist::Communicator> comm) {
             if (comm && comm->size() > 1) {
               throw Error(fmt::format(
                   "strategy.sharding.mode: 'none' in a job of {} ranks would train {} separate "
                   "models; use ddp",
                   comm->size(), comm->size()));
             }
             return std::make_shared<Sharding>();
           }},
          {"ddp",
           [](const ShardingConfig& cfg, std::shared_ptr<dist::Communicator> comm) {
             return std::make_shared<dist::DataParallel>(need_comm(cfg, std::move(comm)),
                                                         cfg.bucket_mb);
           }},
          {"zero1", make_zero},
          {"zero2", make_zero},
          {"zero3", make_zero},
      },
      /*validated=*/true);
  return factories;
}

}  // namespace

void register_sharding(const std::string& name, ShardingFactory factory) {
  if (name.empty() || !factory)
    throw std::invalid_argument("register_sharding: empty name or factory");
  registry().add(name, std::move(factory));
}

std::vector<std::string> sharding_names() { return registry().names(); }

std::shared_ptr<Sharding> make_sharding(const ShardingConfig& cfg,
                                        std::shared_ptr<dist::Communicator> comm) {
  return registry().get(cfg.mode)(cfg, std::move(comm));
}

}  // namespace frugal
