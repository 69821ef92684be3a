// ZeroSharding's unit planning (zero_state.h): which parameters form which unit, and each
// unit's flat buffers, one per optimizer group for the trained ones (zero3: and one per dtype
// for the frozen ones).
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
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

  // zero3: the floating-point frozen parameters among `candidates` no unit has claimed yet
  // (sharded too, with no gradient); none under zero1/2, which keep whole parameters anyway.
  std::vector<at::Tensor> take_frozen(const std::vector<at::Tensor>& candidates) {
    std::vector<at::Tensor> out;
    if (s_.stage < 3) return out;
    for (const auto& p : candidates) {
      const auto* impl = p.unsafeGetTensorImpl();
      if (p.requires_grad() || !p.is_floating_point() || group_of_.count(impl) != 0 ||
          claimed_.count(impl) != 0) {
        continue;
      }
      claimed_.insert(impl);
      out.push_back(p);
    }
    return out;
  }

  // Adds a unit of trained `params` and `frozen` ones; false when it has neither.
  bool add(const std::string& unit_name, const std::vector<at::Tensor>& params,
           const std::vector<at::Tensor>& frozen) {
    ShardUnit unit;
    unit.name = unit_name;
    for (size_t g = 0; g < groups_.size(); ++g) add_flat(unit, g, params);
    add_frozen_flats(unit, frozen);
    if (unit.flats.empty()) return false;
    if (s_.stage == 3) {
      // The whole parameters go as soon as this rank's shards are cut from them (the first
      // forward gathers them again), so that setting up holds the model once, unit by unit
      // moving from its whole tensors to the shards, never the model and its flat copy.
      for (size_t f : unit.flats) free_storage(s_.flats[f].full);
    } else {
      unit.gathered = true;
      s_.gathered_bytes += unit.full_bytes;
    }
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
        if (!f.frozen && f.group == g) kept.push_back(f.shard);
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
    unit.params += static_cast<int64_t>(members.size());
    push_flat(unit, fmt::format("{}/group{}", unit.name, g), g, std::move(members),
              std::move(names));
  }

  // Frozen parameters: one flat buffer per dtype and device, as they come.
  void add_frozen_flats(ShardUnit& unit, const std::vector<at::Tensor>& frozen) {
    std::vector<std::pair<std::vector<at::Tensor>, std::vector<std::string>>> kinds;
    for (const auto& p : frozen) {
      auto same = [&p](const auto& kind) {
        const at::Tensor& q = kind.first.front();
        return q.scalar_type() == p.scalar_type() && q.device() == p.device();
      };
      auto it = std::find_if(kinds.begin(), kinds.end(), same);
      if (it == kinds.end()) {
        kinds.emplace_back();
        it = std::prev(kinds.end());
      }
      it->first.push_back(p);
      it->second.push_back(name_of_[p.unsafeGetTensorImpl()]);
    }
    for (size_t k = 0; k < kinds.size(); ++k) {
      unit.has_frozen = true;
      push_flat(unit, fmt::format("{}/frozen{}", unit.name, k), FlatParam::kFrozen,
                std::move(kinds[k].first), std::move(kinds[k].second));
    }
  }

  void push_flat(ShardUnit& unit, std::string name, size_t group, std::vector<at::Tensor> members,
                 std::vector<std::string> names) {
    const at::ScalarType own = members.front().scalar_type();
    const at::ScalarType param_dtype = sharding_dtype(cfg_.param_dtype).value_or(own);
    const at::ScalarType reduce_dtype = sharding_dtype(cfg_.reduce_dtype).value_or(param_dtype);
    unit.flats.push_back(s_.flats.size());
    s_.flats.push_back(FlatParam::build(std::move(name), group, std::move(members),
                                        std::move(names), s_.comm->size(), s_.comm->rank(),
                                        param_dtype, reduce_dtype,
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
    std::vector<at::Tensor> params, frozen;
    for (const Block& b : group) {
      auto mine = builder.take(b.module->parameters(/*recurse=*/true));
      params.insert(params.end(), mine.begin(), mine.end());
      auto still = builder.take_frozen(b.module->parameters(/*recurse=*/true));
      frozen.insert(frozen.end(), still.begin(), still.end());
    }
    const std::string unit_name =
        group.size() == 1 ? group.front().path : group.front().path + ".." + group.back().path;
    if (builder.add(unit_name, params, frozen)) {
      wrapped.push_back({s.units.size() - 1, std::move(group)});
    }
  }
  s.block_units = s.units.size();
  const auto all = setup.model.parameters(/*recurse=*/true);
  builder.add("root", builder.take(all), builder.take_frozen(all));
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
