#include "frugal/distributed/zero_sharding.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <set>

#include "frugal/io/module_state.h"
#include "frugal/models/materialize.h"
#include "frugal/optim/clip.h"
#include "frugal/optim/param_state.h"
#include "frugal/strategy/offload_stream.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "zero_state.h"

namespace frugal::dist {

std::optional<c10::ScalarType> sharding_dtype(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw Error("strategy.sharding: unknown dtype '" + name + "' (expected auto, fp32, bf16 or fp16)");
}

namespace {

int stage_of(const std::string& mode) {
  if (mode == "zero1") return 1;
  if (mode == "zero2") return 2;
  if (mode == "zero3" || mode == "hsdp") return 3;
  throw Error("strategy.sharding.mode: '" + mode + "' is not a sharded mode (zero1, zero2, zero3, hsdp)");
}

std::set<std::string> sharded_names(const ZeroState& s) {
  std::set<std::string> names;
  for (const FlatParam& f : s.flats) {
    if (!f.frozen) names.insert(f.names.begin(), f.names.end());
  }
  return names;
}

}  // namespace

ZeroSharding::ZeroSharding(std::shared_ptr<Communicator> comm, const ShardingConfig& cfg)
    : RankSharding(std::move(comm), "ZeroSharding"),
      cfg_(cfg),
      stage_(stage_of(cfg.mode)),
      state_(std::make_shared<ZeroState>()) {
  if (cfg_.prefetch < 0) throw Error("strategy.sharding.prefetch: must be >= 0");
  if (cfg_.unit_mb <= 0) throw Error("strategy.sharding.unit_mb: must be > 0");
  if (cfg_.wrap != "block" && cfg_.wrap != "size") {
    throw Error("strategy.sharding.wrap: unknown policy '" + cfg_.wrap + "' (block, size)");
  }
  (void)sharding_dtype(cfg_.param_dtype);
  (void)sharding_dtype(cfg_.reduce_dtype);
  state_->comm = comm_;
  if (cfg_.mode == "hsdp") make_hsdp_groups();
  state_->stage = stage_;
  state_->prefetch = cfg_.prefetch;
  state_->accumulate_sharded = cfg_.accumulate_sharded;
}

ZeroSharding::~ZeroSharding() = default;

void ZeroSharding::make_hsdp_groups() {
  const int world = comm_->size(), rank = comm_->rank();
  const int n = static_cast<int>(cfg_.shard_size > 0 ? cfg_.shard_size : comm_->info().local_world_size);
  if (n < 1 || world % n != 0) {
    throw Error(fmt::format("strategy.sharding.shard_size: {} does not divide the job's {} ranks "
                            "(hsdp shards within groups of that many ranks{})",
                            n, world, cfg_.shard_size > 0 ? "" : "; 0 takes the ranks of one node"));
  }
  // Group g: ranks g*n .. g*n+n-1 (one node's, with the default size); replica set k: the
  // ranks holding shard k, one per group.
  const int group = rank / n, slot = rank % n;
  std::vector<int> shard_members, replica_members;
  for (int r = group * n; r < group * n + n; ++r) shard_members.push_back(r);
  for (int r = slot; r < world; r += n) replica_members.push_back(r);
  state_->comm = comm_->subgroup(fmt::format("hsdp-shard{}", group), shard_members);
  if (replica_members.size() > 1) {
    state_->replicas = comm_->subgroup(fmt::format("hsdp-replica{}", slot), replica_members);
  }
}

const std::shared_ptr<Communicator>& ZeroSharding::shard_group() const { return state_->comm; }
const std::shared_ptr<Communicator>& ZeroSharding::replica_group() const { return state_->replicas; }

GradientReduction& ZeroSharding::reduction() { return *state_; }

std::string ZeroSharding::name() const { return cfg_.mode; }

void ZeroSharding::set_offload_params(bool pin_memory) {
  if (stage_ != 3) throw Error("strategy.offload.params: needs strategy.sharding.mode zero3");
  if (!state_->flats.empty()) throw std::logic_error("set_offload_params after setup");
  offload_params_ = at::TensorOptions().device(at::kCPU).pinned_memory(
      pin_memory && offload_stream::pinned_allocator_works());
}

void ZeroSharding::setup(const ShardingSetup& setup) {
  ZeroState& s = *state_;
  if (!s.flats.empty()) throw std::logic_error("ZeroSharding::setup called twice");
  if (!setup.optimizer.state().empty()) {
    throw Error("sharding " + cfg_.mode +
                ": set up before the optimizer's first step (its state "
                "would not match the shards)");
  }
  torch::NoGradGuard no_grad;
  // Every rank starts from rank 0's values; a model without values yet (built on the meta
  // device for model.init_from) gets them in its shards after set-up.
  if (has_values(setup.model)) broadcast_module(*comm_, setup.model);
  const std::vector<WrappedUnit> wrapped = plan_units(s, setup, cfg_, offload_params_);
  hook_gradients(state_);
  // zero3: whole parameters exist only around their unit's forward and backward.
  if (stage_ == 3) install_gather_wrappers(state_, wrapped);
  int64_t shard_bytes = 0, frozen_bytes = 0;
  for (const FlatParam& f : s.flats)
    (f.frozen ? frozen_bytes : shard_bytes) += static_cast<int64_t>(f.shard.nbytes());
  std::string frozen_note;
  if (frozen_bytes > 0) {
    frozen_note = fmt::format(", and {:.2f} MiB of frozen parameters", frozen_bytes / 1048576.0);
  }
  log::info(fmt::format(
      "sharding {}: {} ranks ({}), {} units ({} flat buffers), {:.2f} MiB of parameters per "
      "rank's shard{}",
      cfg_.mode,
      cfg_.mode == "hsdp" ? fmt::format("{} x {}", comm_->size() / s.comm->size(), s.comm->size())
                          : std::to_string(comm_->size()),
      comm_->backend(), s.units.size(), s.flats.size(),
      shard_bytes / 1048576.0, frozen_note));
}

void ZeroSharding::begin_micro_step(int64_t index, int64_t count) {
  ZeroState& s = *state_;
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

bool ZeroSharding::any_across_ranks(bool local) {
  return all_reduce_scalar(*comm_, local ? 1.0 : 0.0, Reduce::kMax) != 0.0;
}

at::Tensor ZeroSharding::grad_norm_squared(const std::vector<at::Tensor>& params) {
  // Every rank's shards' squares, summed: the norm of the whole gradient (padding is zero).
  // (hsdp: within the shard group; the other groups hold the same sums.)
  Communicator& group = *state_->comm;
  at::Tensor local = frugal::grad_norm_squared(params).to(group.device());
  group.all_reduce(local, Reduce::kSum, /*async=*/false, "gradient norm");
  return local.cpu();
}

void ZeroSharding::after_optimizer_step(bool stepped) {
  if (stage_ == 3 || !stepped) return;  // zero3 gathers the new shards when it next needs them
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  for (FlatParam& f : state_->flats) f.start_gather(*state_->comm, /*async=*/true);
  for (FlatParam& f : state_->flats) f.wait_gather();
}

void ZeroSharding::zero_grad(torch::optim::Optimizer& optimizer) {
  (void)optimizer;  // its parameters are the shards, whose gradients are grad_shard
  for (FlatParam& f : state_->flats) {
    if (f.frozen) continue;
    f.grad_shard.zero_();
    if (f.grad_full.defined()) {
      f.grad_full.zero_();
    } else {
      for (auto& p : f.params) p.mutable_grad() = at::Tensor();
    }
  }
}

void ZeroSharding::set_full_parameters(bool full) {
  ZeroState& s = *state_;
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (stage_ < 3) return;
  s.pinned_full = full;
  if (full) {
    for (size_t u = 0; u < s.units.size(); ++u) s.gather(u, /*async=*/true);
    for (size_t u = 0; u < s.units.size(); ++u) s.wait(u);
  } else {
    for (size_t u = 0; u < s.units.size(); ++u) s.release(u);
  }
}

ShardLayout ZeroSharding::layout() const {
  ShardLayout layout;
  layout.mode = cfg_.mode;
  layout.world_size = state_->comm->size();
  layout.replicas = state_->replicas ? state_->replicas->size() : 1;
  for (const FlatParam& f : state_->flats) {
    if (f.frozen) continue;  // not in checkpoints
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
  // hsdp: the other groups hold the same shards; the first group's are the ones written.
  const bool writes_shards = !state_->replicas || state_->replicas->rank() == 0;
  for (const FlatParam& f : state_->flats) {
    if (f.frozen || !writes_shards) continue;
    // The live tensors, not copies (where they are: a checkpoint's writer copies each to the
    // host when its turn comes), so that saving holds no second copy of the rank's state.
    out.shard.emplace_back(shard_key(f.name, "param"), f.shard.detach());
    for (const auto& [kind, t] : param_state_tensors(optimizer, holder ? holder(f.shard) : f.shard)) {
      out.shard.emplace_back(shard_key(f.name, kind), t.detach());
    }
  }
  out.model = io::module_state(model, sharded_names(*state_));
  out.layout_json = layout_to_json(layout());
  return out;
}

bool ZeroSharding::load_state_dict(SavedState& saved, torch::nn::Module& model,
                                   torch::optim::Optimizer& optimizer, const StateHolder& holder) {
  torch::NoGradGuard no_grad;
  ZeroState& s = *state_;
  // One flat buffer at a time, so that no more than one unit's state is read and not yet in
  // place: its slice of each kind ("param", "exp_avg", ...) goes back before the next is read.
  const RestoreFlat restore = [&](FlatParam& f, std::map<std::string, at::Tensor> kinds) {
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
      if (f.frozen) continue;
      const std::string prefix = f.name + "/";
      std::map<std::string, at::Tensor> kinds;
      for (const std::string& key : own->keys()) {
        if (key.rfind(prefix, 0) == 0) kinds[key.substr(prefix.size())] = own->read(key);
      }
      restore(f, std::move(kinds));
    }
  } else {
    load_resharded(s, saved, state_->comm->rank(), restore);
  }
  // The rest of the model was saved whole (whatever layout wrote it).
  const std::set<std::string> sharded = sharded_names(s);
  io::load_module_state(model, saved.model_except(sharded), saved.what(), sharded);
  // zero1/2 compute on whole parameters: gather the restored shards into them.
  after_optimizer_step(/*stepped=*/true);
  return own != nullptr;
}

int64_t ZeroSharding::unit_count() const { return static_cast<int64_t>(state_->units.size()); }

int64_t ZeroSharding::sharded_state_bytes() const {
  int64_t bytes = 0;
  for (const FlatParam& f : state_->flats) {
    if (f.frozen) {
      bytes += static_cast<int64_t>(f.shard.nbytes());
      continue;
    }
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
