#include "frugal/engine/sharding_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <mutex>

#include "frugal/config/strategy_names.h"
#include "frugal/dist/ddp.h"
#include "frugal/dist/fsdp.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<dist::Communicator> need_comm(const ShardingConfig& cfg,
                                              std::shared_ptr<dist::Communicator> comm) {
  if (!comm) {
    throw Error(fmt::format("strategy.sharding.mode: {} needs the job's communicator: pass "
                            "frugal::dist::init_from_env(cfg.distributed) to the Engine",
                            cfg.mode));
  }
  return comm;
}

std::shared_ptr<Sharding> make_fsdp(const ShardingConfig& cfg,
                                    std::shared_ptr<dist::Communicator> comm) {
  return std::make_shared<dist::FullyShardedDataParallel>(need_comm(cfg, std::move(comm)), cfg);
}

std::map<std::string, ShardingFactory>& registry() {
  static std::map<std::string, ShardingFactory> factories = {
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
      {"zero1", make_fsdp},
      {"zero2", make_fsdp},
      {"zero3", make_fsdp},
  };
  return factories;
}

}  // namespace

void register_sharding(const std::string& name, ShardingFactory factory) {
  if (name.empty() || !factory) throw std::invalid_argument("register_sharding: empty name or factory");
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[name] = std::move(factory);
  }
  register_strategy_name("strategy.sharding.mode", name);
}

std::vector<std::string> sharding_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, _] : registry()) names.push_back(name);
  return names;
}

std::shared_ptr<Sharding> make_sharding(const ShardingConfig& cfg,
                                        std::shared_ptr<dist::Communicator> comm) {
  ShardingFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(cfg.mode);
    if (it != registry().end()) factory = it->second;
  }
  if (!factory) {
    throw Error(fmt::format("strategy.sharding.mode: unknown mode '{}' (registered: {})", cfg.mode,
                            fmt::join(sharding_names(), ", ")));
  }
  return factory(cfg, std::move(comm));
}

}  // namespace frugal
