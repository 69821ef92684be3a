#include "frugal/distributed/zero_sharding.h"

#include <torch/utils.h>
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "final_gradients.h"
#include "flat_param.h"
#include "frugal/models/blocks.h"
#include "frugal/models/unit.h"
#include "frugal/optim/clip.h"
#include "frugal/io/module_state.h"
#include "frugal/optim/param_state.h"
#include "frugal/strategy/gradient_hooks.h"
#include "frugal/strategy/offload_stream.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::dist {

std::optional<c10::ScalarType> sharding_dtype(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw Error("strategy.sharding: unknown dtype '" + name + "' (expected auto, fp32, bf16 or fp16)");
}

namespace {

constexpr const char* kShardWrapperName = "shard";

int stage_of(const std::string& mode) {
  if (mode == "zero1") return 1;
  if (mode == "zero2") return 2;
  if (mode == "zero3") return 3;
  throw Error("strategy.sharding.mode: '" + mode + "' is not a sharded mode (zero1, zero2, zero3)");
}

int64_t bytes_of(const std::vector<at::Tensor>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += static_cast<int64_t>(p.nbytes());
  return n;
}

}  // namespace

struct ZeroSharding::State {
  struct ShardUnit {
    std::string name;
    std::vector<size_t> flats;
    int64_t params = 0;     // trained parameters in it
    int64_t ready = 0;      // of them, with their gradient in this backward
    int64_t full_bytes = 0; // its whole parameters, gathered
    bool gathered = false;  // whole parameters present (or being gathered)
  };

  std::shared_ptr<Communicator> comm;
  int stage = 3;
  int64_t prefetch = 1;
  bool accumulate_sharded = true;
  std::vector<FlatParam> flats;
  std::vector<ShardUnit> units;     // forward order: the block units, then the root unit
  size_t block_units = 0;           // units[0, block_units) wrap blocks
  std::vector<size_t> launch_order; // backward order: last block first, the root last
  std::vector<size_t> unit_of_param;  // per hooked parameter
  std::vector<char> reported;         // per hooked parameter, this backward
  GradientHooks hooks;                // on_gradient after each parameter's accumulation
  std::recursive_mutex mutex;
  bool sync = true;          // this micro-step's gradients are reduced
  bool pinned_full = false;  // set_full_parameters(true)
  size_t next_launch = 0;
  FinalGradients final_gradients;  // notify_final_gradients
  int64_t gathered_bytes = 0;
  int64_t peak_gathered = 0;

  void gather(size_t u, bool async) {
    ShardUnit& unit = units[u];
    if (unit.gathered) return;
    for (size_t f : unit.flats) flats[f].start_gather(*comm, async);
    unit.gathered = true;
    gathered_bytes += unit.full_bytes;
    peak_gathered = std::max(peak_gathered, gathered_bytes);
  }

  void wait(size_t u) {
    for (size_t f : units[u].flats) {
      if (flats[f].gathering.pending()) flats[f].wait_gather();
    }
  }

  // zero3: frees the unit's whole parameters (they stay for zero1/2, and while pinned).
  void release(size_t u) {
    ShardUnit& unit = units[u];
    if (stage < 3 || pinned_full || !unit.gathered) return;
    wait(u);
    for (size_t f : unit.flats) free_storage(flats[f].full);
    unit.gathered = false;
    gathered_bytes -= unit.full_bytes;
  }

  // Starts gathering the next `prefetch` block units in `direction` (+1 forward, -1 backward).
  void prefetch_from(size_t u, int direction) {
    if (stage < 3 || u >= block_units) return;
    for (int64_t k = 1; k <= prefetch; ++k) {
      const int64_t v = static_cast<int64_t>(u) + direction * k;
      if (v < 0 || v >= static_cast<int64_t>(block_units)) break;
      gather(static_cast<size_t>(v), /*async=*/true);
    }
  }

  void ensure_gathered(size_t u) {
    gather(u, /*async=*/false);
    wait(u);
  }

  // Reduce-scatters complete units in launch order (every rank issues collectives in the same
  // order); `force`: all remaining ones, complete or not (end of backward).
  void launch_in_order(bool force) {
    while (next_launch < launch_order.size()) {
      const size_t u = launch_order[next_launch];
      ShardUnit& unit = units[u];
      if (!force && unit.ready < unit.params) break;
      for (size_t f : unit.flats) flats[f].start_reduce(*comm);
      ++next_launch;
      final_gradients.started(u, [this](size_t v) { return finish_unit(v); });
    }
  }

  // Finishes a unit's reduce-scatters; its shards' gradients are then final.
  std::vector<at::Tensor> finish_unit(size_t u) {
    std::vector<at::Tensor> shards;
    for (size_t f : units[u].flats) {
      flats[f].finish_reduce();
      shards.push_back(flats[f].shard);
    }
    return shards;
  }

  void on_gradient(size_t index) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    const size_t u = unit_of_param[index];
    if (reported[index]) {
      throw Error(fmt::format(
          "sharding {}: a parameter of unit '{}' received its gradient twice in one backward "
          "(used both inside and outside a checkpointed unit, or in two units?)",
          stage == 1 ? "zero1" : stage == 2 ? "zero2" : "zero3", units[u].name));
    }
    reported[index] = 1;
    if (++units[u].ready < units[u].params) return;
    if (sync) launch_in_order(/*force=*/false);
    release(u);  // its backward is over
  }

  // Before a unit's backward (a hook on its output's gradient): its parameters again.
  void before_backward(size_t u) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    ensure_gathered(u);
    prefetch_from(u, -1);
  }

  // After each micro-step's backward: reductions finished and added to the shards' gradients,
  // parameters not needed any more freed, counters reset.
  void end_backward() {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (sync) launch_in_order(/*force=*/true);
    final_gradients.finish_all([this](size_t v) { return finish_unit(v); });
    for (FlatParam& f : flats) f.finish_reduce();
    for (size_t u = 0; u < units.size(); ++u) release(u);
    std::fill(reported.begin(), reported.end(), 0);
    for (ShardUnit& unit : units) unit.ready = 0;
    next_launch = 0;
  }
};

ZeroSharding::ZeroSharding(std::shared_ptr<Communicator> comm, const ShardingConfig& cfg)
    : comm_(std::move(comm)),
      cfg_(cfg),
      stage_(stage_of(cfg.mode)),
      state_(std::make_shared<State>()) {
  if (!comm_) throw std::invalid_argument("ZeroSharding needs a communicator");
  if (cfg_.prefetch < 0) throw Error("strategy.sharding.prefetch: must be >= 0");
  if (cfg_.unit_mb <= 0) throw Error("strategy.sharding.unit_mb: must be > 0");
  if (cfg_.wrap != "block" && cfg_.wrap != "size") {
    throw Error("strategy.sharding.wrap: unknown policy '" + cfg_.wrap + "' (block, size)");
  }
  (void)sharding_dtype(cfg_.param_dtype);
  (void)sharding_dtype(cfg_.reduce_dtype);
  state_->comm = comm_;
  state_->stage = stage_;
  state_->prefetch = cfg_.prefetch;
  state_->accumulate_sharded = cfg_.accumulate_sharded;
}

ZeroSharding::~ZeroSharding() = default;

std::string ZeroSharding::name() const { return cfg_.mode; }

void ZeroSharding::set_offload_params(bool pin_memory) {
  if (stage_ != 3) throw Error("strategy.offload.params: needs strategy.sharding.mode zero3");
  if (!state_->flats.empty()) throw std::logic_error("set_offload_params after setup");
  offload_params_ = at::TensorOptions().device(at::kCPU).pinned_memory(
      pin_memory && offload_stream::pinned_allocator_works());
}

void ZeroSharding::setup(const ShardingSetup& setup) {
  State& s = *state_;
  if (!s.flats.empty()) throw std::logic_error("ZeroSharding::setup called twice");
  torch::nn::Module& model = setup.model;
  torch::optim::Optimizer& optimizer = setup.optimizer;
  const std::string who = "sharding " + cfg_.mode;
  if (!optimizer.state().empty()) {
    throw Error(who + ": set up before the optimizer's first step (its state would not match "
                      "the shards)");
  }
  torch::NoGradGuard no_grad;
  // 1. Every rank starts from rank 0's parameters and buffers.
  broadcast_module(*comm_, model);
  std::unordered_map<const c10::TensorImpl*, std::string> name_of;
  for (auto& p : model.named_parameters(/*recurse=*/true)) {
    name_of[p.value().unsafeGetTensorImpl()] = p.key();
  }
  // 2. The optimizer group of each trained parameter: a flat buffer never mixes groups, so
  //    each keeps its own options (weight decay or not).
  auto& groups = optimizer.param_groups();
  std::unordered_map<const c10::TensorImpl*, size_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g].params()) group_of[p.unsafeGetTensorImpl()] = g;
  }
  std::unordered_set<const c10::TensorImpl*> claimed;
  auto take = [&](const std::vector<at::Tensor>& candidates) {
    std::vector<at::Tensor> out;
    for (const auto& p : candidates) {
      const auto* impl = p.unsafeGetTensorImpl();
      if (!p.requires_grad() || group_of.count(impl) == 0 || claimed.count(impl) != 0) continue;
      claimed.insert(impl);
      out.push_back(p);
    }
    return out;
  };
  const int world = comm_->size(), rank = comm_->rank();
  auto add_unit = [&](const std::string& unit_name, const std::vector<at::Tensor>& params) {
    State::ShardUnit unit;
    unit.name = unit_name;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<at::Tensor> members;
      std::vector<std::string> names;
      for (const auto& p : params) {
        if (group_of.at(p.unsafeGetTensorImpl()) != g) continue;
        if (!members.empty() && (p.scalar_type() != members.front().scalar_type() ||
                                 p.device() != members.front().device())) {
          throw Error(fmt::format("{}: unit '{}' mixes dtypes or devices ({} and {}); one flat "
                                  "buffer needs one", who, unit_name, name_of[p.unsafeGetTensorImpl()],
                                  names.front()));
        }
        members.push_back(p);
        names.push_back(name_of[p.unsafeGetTensorImpl()]);
      }
      if (members.empty()) continue;
      const at::ScalarType own = members.front().scalar_type();
      const at::ScalarType param_dtype = sharding_dtype(cfg_.param_dtype).value_or(own);
      const at::ScalarType reduce_dtype = sharding_dtype(cfg_.reduce_dtype).value_or(param_dtype);
      unit.params += static_cast<int64_t>(members.size());
      unit.flats.push_back(s.flats.size());
      s.flats.push_back(FlatParam::build(fmt::format("{}/group{}", unit_name, g), g,
                                         std::move(members), std::move(names), world, rank,
                                         param_dtype, reduce_dtype,
                                         /*shard_is_view=*/stage_ < 3 && param_dtype == own,
                                         /*keep_full_grad=*/stage_ == 1, offload_params_));
      unit.full_bytes += static_cast<int64_t>(s.flats.back().full.nbytes());
    }
    if (unit.flats.empty()) return false;
    unit.gathered = true;
    s.gathered_bytes += unit.full_bytes;
    s.units.push_back(std::move(unit));
    return true;
  };

  // 3. Units: blocks (one each, or merged up to unit_mb), then the root with the rest.
  std::vector<Block> blocks;
  if (!setup.block_lists.empty()) blocks = list_blocks(model, setup.block_lists, who);
  std::vector<std::vector<Block>> block_groups;
  const double unit_bytes = cfg_.unit_mb * 1024 * 1024;
  double open_bytes = 0;
  for (const Block& b : blocks) {
    if (block_groups.empty() || cfg_.wrap == "block" || open_bytes >= unit_bytes) {
      block_groups.emplace_back();
      open_bytes = 0;
    }
    block_groups.back().push_back(b);
    open_bytes += static_cast<double>(bytes_of(b.module->parameters()));
  }
  std::vector<std::pair<size_t, std::vector<Block>>> wrapped;  // unit index, its blocks
  for (const auto& group : block_groups) {
    std::vector<at::Tensor> params;
    for (const Block& b : group) {
      auto mine = take(b.module->parameters(/*recurse=*/true));
      params.insert(params.end(), mine.begin(), mine.end());
    }
    const std::string unit_name = group.size() == 1
                                      ? group.front().path
                                      : group.front().path + ".." + group.back().path;
    if (add_unit(unit_name, params)) wrapped.emplace_back(s.units.size() - 1, group);
  }
  s.block_units = s.units.size();
  add_unit("root", take(model.parameters(/*recurse=*/true)));
  for (size_t u = s.block_units; u-- > 0;) s.launch_order.push_back(u);
  if (s.units.size() > s.block_units) s.launch_order.push_back(s.block_units);

  // 4. The optimizer steps the shards (and keeps whatever it held that is not sharded).
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> kept;
    for (const auto& p : groups[g].params()) {
      if (claimed.count(p.unsafeGetTensorImpl()) == 0) kept.push_back(p);
    }
    for (const FlatParam& f : s.flats) {
      if (f.group == g) kept.push_back(f.shard);
    }
    groups[g].params() = std::move(kept);
  }

  // 5. A hook after each parameter's gradient accumulation counts its unit down.
  std::vector<at::Tensor> hooked;
  for (size_t u = 0; u < s.units.size(); ++u) {
    for (size_t f : s.units[u].flats) {
      for (const at::Tensor& p : s.flats[f].params) {
        s.unit_of_param.push_back(u);
        hooked.push_back(p);
      }
    }
  }
  std::weak_ptr<State> weak = state_;
  s.hooks = GradientHooks(hooked, [weak](size_t index) {
    if (auto state = weak.lock()) state->on_gradient(index);
  });
  s.reported.assign(s.unit_of_param.size(), 0);

  // 6. zero3: whole parameters exist only around their unit's forward and backward.
  if (stage_ == 3) {
    for (size_t u = 0; u < s.units.size(); ++u) s.release(u);
    for (const auto& [u, unit_blocks] : wrapped) {
      for (size_t i = 0; i < unit_blocks.size(); ++i) {
        auto* block = dynamic_cast<Unit*>(unit_blocks[i].module.get());
        if (block == nullptr) {
          throw Error(fmt::format("{}: {} is a {}, not a frugal::Unit: derive it from frugal::Unit "
                                  "so that its parameters can be gathered around it",
                                  who, unit_blocks[i].path, unit_blocks[i].module->name()));
        }
        const bool first = i == 0, last = i + 1 == unit_blocks.size();
        const size_t unit = u;
        block->set_wrapper(kShardWrapperName, wrap_layer::kShard,
                           [weak, unit, first, last](const at::Tensor& x, const UnitFn& inner) {
          auto state = weak.lock();
          if (!state) return inner(x);
          if (first) {
            std::lock_guard<std::recursive_mutex> lock(state->mutex);
            state->ensure_gathered(unit);
            state->prefetch_from(unit, +1);
          }
          at::Tensor y = inner(x);
          if (last) {
            std::lock_guard<std::recursive_mutex> lock(state->mutex);
            if (y.requires_grad()) {
              std::weak_ptr<State> w = state;
              y.register_hook([w, unit](const at::Tensor&) {
                if (auto s = w.lock()) s->before_backward(unit);
              });
            }
            state->release(unit);
          }
          return y;
        });
      }
    }
    if (blocks.empty()) {
      log::warn(who + ": the model names no blocks (Model::block_lists / Engine::mark_blocks); "
                      "all its parameters form one unit, gathered for the whole step");
    }
  }
  int64_t shard_bytes = 0;
  for (const FlatParam& f : s.flats) shard_bytes += static_cast<int64_t>(f.grad_shard.nbytes());
  log::info(fmt::format("{}: {} ranks ({}), {} units ({} flat buffers), {:.2f} MiB of "
                        "parameters per rank's shard", who, world, comm_->backend(),
                        s.units.size(), s.flats.size(), shard_bytes / 1048576.0));
}

void ZeroSharding::begin_micro_step(int64_t index, int64_t count) {
  State& s = *state_;
  if (index > 0) s.end_backward();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  // zero1 keeps whole gradients anyway: reduce once, on the last micro-step; so do zero2/3
  // when told to keep them whole during accumulation.
  s.sync = (stage_ == 1 || !s.accumulate_sharded) ? index == count - 1 : true;
  if (index == 0) s.peak_gathered = s.gathered_bytes;
  // The root unit (embeddings, final norm, head) is used from the first op to the last.
  if (stage_ == 3 && s.units.size() > s.block_units) s.ensure_gathered(s.block_units);
}

void ZeroSharding::finish_gradients() { state_->end_backward(); }

bool ZeroSharding::notify_final_gradients(
    std::function<void(const std::vector<at::Tensor>&)> ready) {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  if (!state_->sync) return false;  // this micro-step reduces nothing
  state_->final_gradients.arm(std::move(ready));
  return true;
}

double ZeroSharding::sum_across_ranks(double v) { return all_reduce_scalar(*comm_, v); }

bool ZeroSharding::any_across_ranks(bool local) {
  return all_reduce_scalar(*comm_, local ? 1.0 : 0.0, Reduce::kMax) != 0.0;
}

at::Tensor ZeroSharding::grad_norm_squared(const std::vector<at::Tensor>& params) {
  // Every rank's shards' squares, summed: the norm of the whole gradient (padding is zero).
  at::Tensor local = frugal::grad_norm_squared(params).to(comm_->device());
  comm_->all_reduce(local, Reduce::kSum, /*async=*/false, "gradient norm");
  return local.cpu();
}

void ZeroSharding::after_optimizer_step(bool stepped) {
  if (stage_ == 3 || !stepped) return;  // zero3 gathers the new shards when it next needs them
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  for (FlatParam& f : state_->flats) f.start_gather(*comm_, /*async=*/true);
  for (FlatParam& f : state_->flats) f.wait_gather();
}

void ZeroSharding::zero_grad(torch::optim::Optimizer& optimizer) {
  (void)optimizer;  // its parameters are the shards, whose gradients are grad_shard
  for (FlatParam& f : state_->flats) {
    f.grad_shard.zero_();
    if (f.grad_full.defined()) {
      f.grad_full.zero_();
    } else {
      for (auto& p : f.params) p.mutable_grad() = at::Tensor();
    }
  }
}

void ZeroSharding::set_full_parameters(bool full) {
  State& s = *state_;
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (stage_ < 3) return;
  if (full) {
    s.pinned_full = true;
    for (size_t u = 0; u < s.units.size(); ++u) s.gather(u, /*async=*/true);
    for (size_t u = 0; u < s.units.size(); ++u) s.wait(u);
  } else {
    s.pinned_full = false;
    for (size_t u = 0; u < s.units.size(); ++u) s.release(u);
  }
}

ShardLayout ZeroSharding::layout() const {
  ShardLayout layout;
  layout.mode = cfg_.mode;
  layout.world_size = comm_->size();
  for (const FlatParam& f : state_->flats) {
    FlatLayout flat;
    flat.name = f.name;
    flat.numel = f.numel;
    flat.names = f.names;
    flat.offsets = f.offsets;
    for (const auto& p : f.params) flat.shapes.push_back(p.sizes().vec());
    layout.flats.push_back(std::move(flat));
  }
  return layout;
}

StateDict ZeroSharding::state_dict(const torch::nn::Module& model,
                                   torch::optim::Optimizer& optimizer,
                                   const StateHolder& holder) const {
  StateDict out;
  std::set<std::string> sharded;
  for (const FlatParam& f : state_->flats) {
    sharded.insert(f.names.begin(), f.names.end());
    // The live tensors, not copies (where they are: a checkpoint's writer copies each to the
    // host when its turn comes), so that saving holds no second copy of the rank's state.
    out.shard.emplace_back(shard_key(f.name, "param"), f.shard.detach());
    for (const auto& [kind, t] : param_state_tensors(optimizer, holder ? holder(f.shard) : f.shard)) {
      out.shard.emplace_back(shard_key(f.name, kind), t.detach());
    }
  }
  out.model = io::module_state(model, sharded);
  out.layout_json = layout_to_json(layout());
  return out;
}

bool ZeroSharding::load_state_dict(SavedState& saved, torch::nn::Module& model,
                                   torch::optim::Optimizer& optimizer, const StateHolder& holder) {
  torch::NoGradGuard no_grad;
  State& s = *state_;
  const int rank = comm_->rank();
  std::set<std::string> sharded;
  for (const FlatParam& f : s.flats) sharded.insert(f.names.begin(), f.names.end());
  // One flat buffer at a time, so that no more than one unit's state is read and not yet in
  // place: its slice of each kind ("param", "exp_avg", ...) goes back before the next is read.
  auto restore = [&](FlatParam& f, std::map<std::string, at::Tensor> kinds) {
    auto param = kinds.find("param");
    if (param == kinds.end()) throw Error(saved.what() + ": no shard of '" + f.name + "'");
    if (param->second.numel() != f.shard_numel) {
      throw Error(fmt::format("{}: the shard of '{}' has {} elements, this run's {}", saved.what(),
                              f.name, param->second.numel(), f.shard_numel));
    }
    f.shard.copy_(param->second.view_as(f.shard));
    kinds.erase(param);
    if (!kinds.empty()) set_param_state(optimizer, holder ? holder(f.shard) : f.shard, kinds);
  };
  SavedShard* own = saved.own_shard(layout_to_json(layout()));
  if (own != nullptr) {
    // The same cut: this rank's shard goes back as it was, bit for bit.
    for (FlatParam& f : s.flats) {
      const std::string prefix = f.name + "/";
      std::map<std::string, at::Tensor> kinds;
      for (const std::string& key : own->keys()) {
        if (key.rfind(prefix, 0) == 0) kinds[key.substr(prefix.size())] = own->read(key);
      }
      restore(f, std::move(kinds));
    }
  } else {
    // Another layout: each parameter's saved value, by name, cut again for this world. Only
    // this rank's slice of each is read: from a checkpoint, the byte ranges that hold it; from
    // memory-mapped files (a model folder), the pages.
    std::vector<std::string> kinds = saved.optimizer_kinds();
    for (const std::string& kind : kinds) refuse_unreshardable(saved, kind);
    kinds.insert(kinds.begin(), "param");
    int64_t read = 0, total = 0;  // parameter elements
    // What to read of one flat buffer: this rank's part of each parameter, of every kind,
    // into `restored`'s slices; the step count's range (one per buffer) in `step`.
    struct Plan {
      std::map<std::string, at::Tensor> restored;
      std::optional<size_t> step;
    };
    auto plan = [&](FlatParam& f, std::vector<SavedRange>& ranges) {
      Plan p;
      const int64_t first = static_cast<int64_t>(rank) * f.shard_numel;
      const int64_t last = first + f.shard_numel;
      for (const std::string& kind : kinds) {
        if (kind == "step") {  // kept in its saved dtype
          if (saved.saved_numel(kind, f.names.front()) == 1) {
            p.step = ranges.size();
            ranges.push_back({kind, f.names.front(), 0, 1, at::Tensor()});
          }
          continue;
        }
        at::Tensor slice = at::zeros({f.shard_numel}, f.shard.options().requires_grad(false));
        std::string missing;  // a parameter without a saved value of this kind
        size_t found = 0;
        for (size_t i = 0; i < f.names.size(); ++i) {
          const int64_t saved_numel = saved.saved_numel(kind, f.names[i]);
          const int64_t numel = f.params[i].numel();
          if (kind == "param") total += numel;
          if (saved_numel < 0) {
            if (missing.empty()) missing = f.names[i];
            continue;
          }
          ++found;
          if (saved_numel != numel) {
            throw Error(fmt::format("{}: '{}' has {} elements, the model's {}", saved.what(),
                                    f.names[i], saved_numel, numel));
          }
          const int64_t begin = std::max(f.offsets[i], first);
          const int64_t end = std::min(f.offsets[i] + numel, last);
          if (begin >= end) continue;
          ranges.push_back({kind, f.names[i], begin - f.offsets[i], end - begin,
                            slice.narrow(0, begin - first, end - begin)});
          if (kind == "param") read += end - begin;
        }
        if (found == 0 && kind != "param") continue;  // no optimizer state for these yet
        if (!missing.empty()) {
          throw Error(fmt::format("{}: it has no {} of '{}' (a parameter of '{}')", saved.what(),
                                  kind, missing, f.name));
        }
        p.restored[kind] = slice;
      }
      return p;
    };
    // A unit's flat buffers at a time (its decayed and undecayed parameters lie side by side
    // in a whole checkpoint's files), read in one go in the order the checkpoint's files hold
    // them, then put in place before the next unit is read.
    std::vector<std::vector<size_t>> batches;
    std::vector<bool> batched(s.flats.size(), false);
    for (const auto& unit : s.units) {
      batches.push_back(unit.flats);
      for (size_t f : unit.flats) batched[f] = true;
    }
    for (size_t f = 0; f < s.flats.size(); ++f) {
      if (!batched[f]) batches.push_back({f});
    }
    for (const std::vector<size_t>& batch : batches) {
      std::vector<SavedRange> ranges;
      std::vector<Plan> plans;
      for (size_t f : batch) plans.push_back(plan(s.flats[f], ranges));
      saved.read_ranges(ranges);
      for (size_t k = 0; k < batch.size(); ++k) {
        if (plans[k].step) plans[k].restored["step"] = ranges[*plans[k].step].into.reshape({});
        restore(s.flats[batch[k]], std::move(plans[k].restored));
      }
    }
    log::info(fmt::format("zero{}: shards cut from {}: {} of {} parameter elements read by this "
                          "rank",
                          stage_, saved.what(), read, total));
  }
  // The rest of the model was saved whole (whatever layout wrote it).
  io::load_module_state(model, saved.model_except(sharded), saved.what(), sharded);
  // zero1/2 compute on whole parameters: gather the restored shards into them.
  after_optimizer_step(/*stepped=*/true);
  return own != nullptr;
}

int64_t ZeroSharding::unit_count() const { return static_cast<int64_t>(state_->units.size()); }

int64_t ZeroSharding::flat_param_count() const {
  return static_cast<int64_t>(state_->flats.size());
}

int64_t ZeroSharding::sharded_state_bytes() const {
  int64_t bytes = 0;
  for (const FlatParam& f : state_->flats) {
    // Views into the whole buffers (zero1/2) are not counted twice.
    if (!f.shard.storage().is_alias_of(f.full.storage())) {
      bytes += static_cast<int64_t>(f.shard.nbytes());
    }
    if (!f.grad_full.defined() || !f.grad_shard.storage().is_alias_of(f.grad_full.storage())) {
      bytes += static_cast<int64_t>(f.grad_shard.nbytes());
    }
    if (stage_ < 3) bytes += static_cast<int64_t>(f.full.nbytes());
    if (f.grad_full.defined()) bytes += static_cast<int64_t>(f.grad_full.nbytes());
  }
  return bytes;
}

int64_t ZeroSharding::peak_gathered_bytes() const { return state_->peak_gathered; }

}  // namespace frugal::dist
