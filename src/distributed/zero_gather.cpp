// zero3's gather and release around each unit, and the reduce-scatters launched as units
// finish their backward (zero_state.h).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include "frugal/models/unit.h"
#include "frugal/util/error.h"
#include "zero_state.h"

namespace frugal::dist {

namespace {
constexpr const char* kShardWrapperName = "shard";
}  // namespace

void ZeroState::gather(size_t u, bool async) {
  ShardUnit& unit = units[u];
  if (unit.gathered) return;
  for (size_t f : unit.flats) flats[f].start_gather(*comm, async);
  unit.gathered = true;
  gathered_bytes += unit.full_bytes;
  peak_gathered = std::max(peak_gathered, gathered_bytes);
}

void ZeroState::wait(size_t u) {
  for (size_t f : units[u].flats) {
    if (flats[f].gathering.pending()) flats[f].wait_gather();
  }
}

void ZeroState::release(size_t u) {
  ShardUnit& unit = units[u];
  if (stage < 3 || pinned_full || !unit.gathered) return;
  wait(u);
  for (size_t f : unit.flats) free_storage(flats[f].full);
  unit.gathered = false;
  gathered_bytes -= unit.full_bytes;
}

void ZeroState::prefetch_from(size_t u, int direction) {
  if (stage < 3 || u >= block_units) return;
  for (int64_t k = 1; k <= prefetch; ++k) {
    const int64_t v = static_cast<int64_t>(u) + direction * k;
    if (v < 0 || v >= static_cast<int64_t>(block_units)) break;
    gather(static_cast<size_t>(v), /*async=*/true);
  }
}

void ZeroState::ensure_gathered(size_t u) {
  gather(u, /*async=*/false);
  wait(u);
}

// Every rank issues collectives in the same order: units launch in launch_order only.
void ZeroState::launch_in_order(bool force) {
  while (next_launch < launch_order.size()) {
    const size_t u = launch_order[next_launch];
    ShardUnit& unit = units[u];
    if (!force && unit.ready < unit.params) break;
    for (size_t f : unit.flats) {
      if (!flats[f].frozen) flats[f].start_reduce(*comm);
    }
    ++next_launch;
    final_gradients.started(u, [this](size_t v) { return finish_unit(v); });
  }
}

std::vector<at::Tensor> ZeroState::finish_unit(size_t u) {
  std::vector<at::Tensor> shards;
  for (size_t f : units[u].flats) {
    if (flats[f].frozen) continue;
    flats[f].finish_reduce(replicas.get());
    shards.push_back(flats[f].shard);
  }
  return shards;
}

void ZeroState::on_gradient(size_t index) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  const size_t u = unit_of_param[index];
  mark_reported(index, fmt::format("{}: a parameter of unit '{}'", mode(), units[u].name));
  if (++units[u].ready < units[u].params) return;
  if (sync) launch_in_order(/*force=*/false);
  release_if_backward_done(u);
}

void ZeroState::after_input_gradient(size_t u) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  units[u].input_pending = false;
  release_if_backward_done(u);
}

void ZeroState::release_if_backward_done(size_t u) {
  const ShardUnit& unit = units[u];
  if (unit.ready >= unit.params && !unit.input_pending) release(u);
}

void ZeroState::before_backward(size_t u) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  ensure_gathered(u);
  prefetch_from(u, -1);
}

void ZeroState::end_backward() {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  if (sync) launch_in_order(/*force=*/true);
  final_gradients.finish_all([this](size_t v) { return finish_unit(v); });
  for (FlatParam& f : flats) f.finish_reduce(replicas.get());
  for (size_t u = 0; u < units.size(); ++u) release(u);
  reset_backward();
  for (ShardUnit& unit : units) {
    unit.ready = 0;
    unit.input_pending = false;
  }
}

void hook_gradients(const std::shared_ptr<ZeroState>& state) {
  ZeroState& s = *state;
  std::vector<at::Tensor> hooked;
  for (size_t u = 0; u < s.units.size(); ++u) {
    for (size_t f : s.units[u].flats) {
      if (s.flats[f].frozen) continue;
      for (const at::Tensor& p : s.flats[f].params) {
        s.unit_of_param.push_back(u);
        hooked.push_back(p);
      }
    }
  }
  std::weak_ptr<ZeroState> weak = state;
  s.hooks = GradientHooks(hooked, [weak](size_t index) {
    if (auto st = weak.lock()) st->on_gradient(index);
  });
  s.reported.assign(s.unit_of_param.size(), 0);
}

// A unit's first block gathers it (and prefetches the next), and, when the unit holds frozen
// parameters, hooks its input's gradient to learn when its backward is over; its last block
// releases it and hooks its output's gradient to gather it again before its backward.
void install_gather_wrappers(const std::shared_ptr<ZeroState>& state,
                             const std::vector<WrappedUnit>& wrapped) {
  const std::string who = "sharding " + state->mode();
  for (size_t u = 0; u < state->units.size(); ++u) state->release(u);
  std::weak_ptr<ZeroState> weak = state;
  for (const WrappedUnit& w : wrapped) {
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      auto* block = dynamic_cast<Unit*>(w.blocks[i].module.get());
      if (block == nullptr) {
        throw Error(
            fmt::format("{}: {} is a {}, not a frugal::Unit: derive it from frugal::Unit "
                        "so that its parameters can be gathered around it",
                        who, w.blocks[i].path, w.blocks[i].module->name()));
      }
      const bool first = i == 0, last = i + 1 == w.blocks.size();
      const size_t unit = w.unit;
      block->set_wrapper(kShardWrapperName, wrap_layer::kShard,
                         [weak, unit, first, last](const at::Tensor& x, const UnitFn& inner) {
                           auto st = weak.lock();
                           if (!st) return inner(x);
                           if (first) {
                             std::lock_guard<std::recursive_mutex> lock(st->mutex);
                             st->ensure_gathered(unit);
                             st->prefetch_from(unit, +1);
                             if (st->units[unit].has_frozen && x.requires_grad()) {
                               st->units[unit].input_pending = true;
                               std::weak_ptr<ZeroState> again = st;
                               at::Tensor(x).register_hook([again, unit](const at::Tensor&) {
                                 if (auto s = again.lock()) s->after_input_gradient(unit);
                               });
                             }
                           }
                           at::Tensor y = inner(x);
                           if (last) {
                             std::lock_guard<std::recursive_mutex> lock(st->mutex);
                             if (y.requires_grad()) {
                               std::weak_ptr<ZeroState> again = st;
                               y.register_hook([again, unit](const at::Tensor&) {
                                 if (auto s = again.lock()) s->before_backward(unit);
                               });
                             }
                             st->release(unit);
                           }
                           return y;
                         });
    }
  }
}

}  // namespace frugal::dist
