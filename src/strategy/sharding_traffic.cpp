// step_traffic (strategy/sharding_traits.h): what a sharding mode sends per step, from its
// traits, for the planner and `frugal doctor --distributed`.
#include <algorithm>

#include "frugal/strategy/sharding_traits.h"

namespace frugal {

StepTraffic step_traffic(const ShardingTraits& traits, double model_bytes, int world, int group) {
  StepTraffic t;
  if (!traits.data_parallel || world < 2) return t;
  const int n = traits.replicated_groups ? std::clamp(group, 1, world) : world;
  const double ring = static_cast<double>(n - 1) / n;
  t.within = (traits.shards_parameters ? 3.0 : 2.0) * ring * model_bytes;
  if (traits.replicated_groups) {
    const int groups = world / n;
    t.across = groups > 1 ? 2.0 * (groups - 1) / groups * model_bytes / n : 0.0;
  }
  return t;
}

}  // namespace frugal
