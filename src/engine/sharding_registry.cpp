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

// A mode's factory and what it shards. (Named apart from models/registry.cpp's registry():
// both share an anonymous namespace in a unity build.)
struct RegisteredSharding {
  ShardingFactory factory;
  ShardingTraits traits;
};

NamedRegistry<RegisteredSharding>& sharding_modes() {
  static NamedRegistry<RegisteredSharding> modes(
      "strategy.sharding.mode", "mode",
      {
          {"none",
           {[](const ShardingConfig&, std::shared_ptr<dist::Communicator> comm) {
              if (comm && comm->size() > 1) {
                throw Error(fmt::format(
                    "strategy.sharding.mode: 'none' in a job of {} ranks would train {} separate "
                    "models; use ddp",
                    comm->size(), comm->size()));
              }
              return std::make_shared<Sharding>();
            },
            {}}},
          {"ddp",
           {[](const ShardingConfig& cfg, std::shared_ptr<dist::Communicator> comm) {
              return std::make_shared<dist::DataParallel>(need_comm(cfg, std::move(comm)),
                                                          cfg.bucket_mb);
            },
            {/*data_parallel=*/true}}},
          {"zero1", {make_zero, {true, /*shards_optimizer_state=*/true}}},
          {"zero2", {make_zero, {true, true, /*shards_gradients=*/true}}},
          {"zero3", {make_zero, {true, true, true, /*shards_parameters=*/true}}},
          {"hsdp", {make_zero, {true, true, true, true, /*replicated_groups=*/true}}},
      },
      /*validated=*/true);
  return modes;
}

// Built when the library loads, so that config validation knows the built-in names before
// anything asked for this registry.
[[maybe_unused]] const bool kShardingNamesAtLoad = (sharding_modes(), true);

}  // namespace

void register_sharding(const std::string& name, ShardingFactory factory,
                       const ShardingTraits& traits) {
  if (name.empty() || !factory)
    throw std::invalid_argument("register_sharding: empty name or factory");
  sharding_modes().add(name, {std::move(factory), traits});
}

std::vector<std::string> sharding_names() { return sharding_modes().names(); }

std::optional<ShardingTraits> find_sharding_traits(const std::string& mode) {
  if (auto entry = sharding_modes().find(mode)) return entry->traits;
  return std::nullopt;
}

ShardingTraits sharding_traits(const std::string& mode) {
  return sharding_modes().get(mode).traits;
}

std::shared_ptr<Sharding> make_sharding(const ShardingConfig& cfg,
                                        std::shared_ptr<dist::Communicator> comm) {
  return sharding_modes().get(cfg.mode).factory(cfg, std::move(comm));
}

}  // namespace frugal
