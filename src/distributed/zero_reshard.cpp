// Loading ZeroSharding's state from a checkpoint or folder saved under another layout (whole,
// or another world size, zero mode or wrap policy): each parameter's saved value, by name, cut
// again for this rank. Only this rank's slice of each is read: from a checkpoint, the byte
// ranges that hold it (distributed/checkpoint_reader.h); from memory-mapped files (a model
// folder), the pages.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include "frugal/distributed/sharded_state.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "zero_state.h"

namespace frugal::dist {

namespace {

// What to read of one flat buffer: this rank's part of each parameter, of every kind, into
// `restored`'s slices; the step count's range (one per buffer) in `step`.
struct FlatPlan {
  std::map<std::string, at::Tensor> restored;
  std::optional<size_t> step;
};

struct Counts {
  int64_t read = 0, total = 0;  // parameter elements
};

FlatPlan plan_flat(SavedState& saved, const FlatParam& f, const std::vector<std::string>& kinds,
                   int rank, std::vector<SavedRange>& ranges, Counts& counts) {
  FlatPlan p;
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
      if (kind == "param") counts.total += numel;
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
      if (kind == "param") counts.read += end - begin;
    }
    if (found == 0 && kind != "param") continue;  // no optimizer state for these yet
    if (!missing.empty()) {
      throw Error(fmt::format("{}: it has no {} of '{}' (a parameter of '{}')", saved.what(), kind,
                              missing, f.name));
    }
    p.restored[kind] = slice;
  }
  return p;
}

// A unit's flat buffers at a time (its decayed and undecayed parameters lie side by side in a
// whole checkpoint's files), then any flat buffer outside the units.
std::vector<std::vector<size_t>> read_batches(const ZeroState& s) {
  std::vector<std::vector<size_t>> batches;
  std::vector<bool> batched(s.flats.size(), false);
  for (const auto& unit : s.units) {
    batches.emplace_back();
    for (size_t f : unit.flats) {
      if (!s.flats[f].frozen) batches.back().push_back(f);  // frozen ones are not saved
      batched[f] = true;
    }
  }
  for (size_t f = 0; f < s.flats.size(); ++f) {
    if (!batched[f] && !s.flats[f].frozen) batches.push_back({f});
  }
  return batches;
}

}  // namespace

void load_resharded(ZeroState& s, SavedState& saved, int rank, const RestoreFlat& restore) {
  std::vector<std::string> kinds = saved.optimizer_kinds();
  for (const std::string& kind : kinds) refuse_unreshardable(saved, kind);
  kinds.insert(kinds.begin(), "param");
  Counts counts;
  // Each batch is read in one go, in the order the checkpoint's files hold it, and put in
  // place before the next is read: no more than one unit's state is in flight.
  for (const std::vector<size_t>& batch : read_batches(s)) {
    std::vector<SavedRange> ranges;
    std::vector<FlatPlan> plans;
    for (size_t f : batch)
      plans.push_back(plan_flat(saved, s.flats[f], kinds, rank, ranges, counts));
    saved.read_ranges(ranges);
    for (size_t k = 0; k < batch.size(); ++k) {
      if (plans[k].step) plans[k].restored["step"] = ranges[*plans[k].step].into.reshape({});
      restore(s.flats[batch[k]], std::move(plans[k].restored));
    }
  }
  log::info(fmt::format("{}: shards cut from {}: {} of {} parameter elements read by this rank",
                        s.mode(), saved.what(), counts.read, counts.total));
}

}  // namespace frugal::dist
