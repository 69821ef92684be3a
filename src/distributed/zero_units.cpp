// ZeroSharding's unit planning (zero_state.h): which trained parameters form which unit, and
// each unit's flat buffers, one per optimizer group.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#include <unordered_map>
#include <unordered_set>

#include "frugal/distributed/zero_sharding.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "zero_state.h"

namespace frugal::dist {

namespace {

int64_t bytes_of(const std::vector<at::Tensor>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += static_cast<int64_t>(p.nbytes());
  return n;
}

// Blocks in order, one group each (wrap: block) or merged until a group reaches unit_mb.
std::vector<std::vector<Block>> group_blocks(const std::vector<Block>& blocks,
                                             const ShardingConfig& cfg) {
  std::vector<std::vector<Block>> groups;
  const double unit_bytes = cfg.unit_mb * 1024 * 1024;
  double open_bytes = 0;
  for (const Block& b : blocks) {
    if (groups.empty() || cfg.wrap == "block" || open_bytes >= unit_bytes) {
      groups.emplace_back();
      open_bytes = 0;
    }
    groups.back().push_back(b);
    open_bytes += static_cast<double>(bytes_of(b.module->parameters()));
  }
  return groups;
}

// Builds the units' flat buffers. A flat buffer never mixes optimizer groups, so each keeps
// its own options (weight decay or not); each parameter belongs to the first unit claiming it.
class UnitBuilder {
 public:
  UnitBuilder(ZeroState& s, const ShardingSetup& setup, const ShardingConfig& cfg,
              const std::optional<at::TensorOptions>& shard_on_host)
      : s_(s), groups_(setup.optimizer.param_groups()), cfg_(cfg), shard_on_host_(shard_on_host) {
    for (auto& p : setup.model.named_parameters(/*recurse=*/true)) {
      name_of_[p.value().unsafeGetTensorImpl()] = p.key();
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (const auto& p : groups_[g].params()) group_of_[p.unsafeGetTensorImpl()] = g;
    }
  }

  // The trained parameters among `candidates` that no unit has claimed yet.
  std::vector<at::Tensor> take(const std::vector<at::Tensor>& candidates) {
    std::vector<at::Tensor> out;
    for (const auto& p : candidates) {
      const auto* impl = p.unsafeGetTensorImpl();
      if (!p.requires_grad() || group_of_.count(impl) == 0 || claimed_.count(impl) != 0) continue;
      claimed_.insert(impl);
      out.push_back(p);
    }
    return out;
  }

  // Adds a unit of `params`; false when it has none to train.
  bool add(const std::string& unit_name, const std::vector<at::Tensor>& params) {
    ShardUnit unit;
    unit.name = unit_name;
    for (size_t g = 0; g < groups_.size(); ++g) add_flat(unit, g, params);
    if (unit.flats.empty()) return false;
    unit.gathered = true;
    s_.gathered_bytes += unit.full_bytes;
    s_.units.push_back(std::move(unit));
    return true;
  }

  // The optimizer steps the shards (and keeps whatever it held that is not sharded).
  void point_optimizer_at_shards() {
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::vector<at::Tensor> kept;
      for (const auto& p : groups_[g].params()) {
        if (claimed_.count(p.unsafeGetTensorImpl()) == 0) kept.push_back(p);
      }
      for (const FlatParam& f : s_.flats) {
        if (f.group == g) kept.push_back(f.shard);
      }
      groups_[g].params() = std::move(kept);
    }
  }

 private:
  void add_flat(ShardUnit& unit, size_t g, const std::vector<at::Tensor>& params) {
    std::vector<at::Tensor> members;
    std::vector<std::string> names;
    for (const auto& p : params) {
      if (group_of_.at(p.unsafeGetTensorImpl()) != g) continue;
      if (!members.empty() && (p.scalar_type() != members.front().scalar_type() ||
                               p.device() != members.front().device())) {
        throw Error(
            fmt::format("sharding {}: unit '{}' mixes dtypes or devices ({} and {}); one "
                        "flat buffer needs one",
                        s_.mode(), unit.name, name_of_[p.unsafeGetTensorImpl()], names.front()));
      }
      members.push_back(p);
      names.push_back(name_of_[p.unsafeGetTensorImpl()]);
    }
    if (members.empty()) return;
    const at::ScalarType own = members.front().scalar_type();
    const at::ScalarType param_dtype = sharding_dtype(cfg_.param_dtype).value_or(own);
    const at::ScalarType reduce_dtype = sharding_dtype(cfg_.reduce_dtype).value_or(param_dtype);
    unit.params += static_cast<int64_t>(members.size());
    unit.flats.push_back(s_.flats.size());
    s_.flats.push_back(FlatParam::build(fmt::format("{}/group{}", unit.name, g), g,
                                        std::move(members), std::move(names), s_.comm->size(),
                                        s_.comm->rank(), param_dtype, reduce_dtype,
                                        /*shard_is_view=*/s_.stage < 3 && param_dtype == own,
                                        /*keep_full_grad=*/s_.stage == 1, shard_on_host_));
    unit.full_bytes += static_cast<int64_t>(s_.flats.back().full.nbytes());
  }

  ZeroState& s_;
  std::vector<torch::optim::OptimizerParamGroup>& groups_;
  const ShardingConfig& cfg_;
  const std::optional<at::TensorOptions>& shard_on_host_;
  std::unordered_map<const c10::TensorImpl*, std::string> name_of_;
  std::unordered_map<const c10::TensorImpl*, size_t> group_of_;
  std::unordered_set<const c10::TensorImpl*> claimed_;
};

}  // namespace

std::vector<WrappedUnit> plan_units(ZeroState& s, const ShardingSetup& setup,
                                    const ShardingConfig& cfg,
                                    const std::optional<at::TensorOptions>& shard_on_host) {
  const std::string who = "sharding " + s.mode();
  UnitBuilder builder(s, setup, cfg, shard_on_host);
  std::vector<Block> blocks;
  if (!setup.block_lists.empty()) blocks = list_blocks(setup.model, setup.block_lists, who);
  std::vector<WrappedUnit> wrapped;
  for (auto& group : group_blocks(blocks, cfg)) {
    std::vector<at::Tensor> params;
    for (const Block& b : group) {
      auto mine = builder.take(b.module->parameters(/*recurse=*/true));
      params.insert(params.end(), mine.begin(), mine.end());
    }
    const std::string unit_name =
        group.size() == 1 ? group.front().path : group.front().path + ".." + group.back().path;
    if (builder.add(unit_name, params)) wrapped.push_back({s.units.size() - 1, std::move(group)});
  }
  s.block_units = s.units.size();
  builder.add("root", builder.take(setup.model.parameters(/*recurse=*/true)));
  for (size_t u = s.block_units; u-- > 0;) s.launch_order.push_back(u);
  if (s.units.size() > s.block_units) s.launch_order.push_back(s.block_units);
  builder.point_optimizer_at_shards();
  if (s.stage == 3 && blocks.empty()) {
    log::warn(who +
              ": the model names no blocks (Model::block_lists / Engine::mark_blocks); "
              "all its parameters form one unit, gathered for the whole step");
  }
  return wrapped;
}

}  // namespace frugal::dist
