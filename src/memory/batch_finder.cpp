#include "frugal/memory/batch_finder.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/engine/device.h"
#include "frugal/engine/engine.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/stats.h"
#include "frugal/models/finetune.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/precision.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::memory {
namespace {

// `steps` optimizer steps at micro-batch `b`; everything it allocated is gone when it returns.
BatchTrial trial(const Config& cfg, const c10::Device& device, int64_t b, int64_t steps) {
  BatchTrial t;
  t.micro_batch = b;
  reset_peaks(device);
  try {
    at::manual_seed(cfg.run.seed);
    auto model = make_model(cfg.model);
    apply_finetuning(*model, cfg.model);  // the run's trainable set: adapters, NF4, frozen
    const PrecisionSpec precision =
        precision_spec(resolve_precision(cfg.strategy.precision, device));
    if (precision.autocast && frozen_weights_follow_autocast(cfg.model)) {
      store_frozen_linear_weights(*model, precision.dtype);  // as the trainer stores them
    }
    model->to(device);
    StrategyConfig strategy = cfg.strategy;
    strategy.sharding = ShardingConfig{};  // one process
    Engine engine(EngineOptions{strategy, cfg.optim.clip_grad_norm, cfg.optim.in_backward});
    engine.setup(model, make_optimizer(cfg.optim, *model));
    auto data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
    LoaderOptions lo;
    lo.batch_size = b * strategy.accumulation;
    lo.num_workers = 0;
    lo.seed = cfg.run.seed;
    DataLoader loader(data, lo);
    for (int64_t s = 0; s < steps; ++s) {
      Batch batch = loader.next().to(device, /*non_blocking=*/true);
      // batch_loss_sum: the trainer's loss, with model.loss_chunk_tokens and masks honoured.
      engine.step(batch, [&](const Batch& mb) { return model->batch_loss_sum(mb); });
    }
    t.fits = true;
  } catch (const c10::OutOfMemoryError& e) {
    // Its first sentence ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ..."):
    // the rest is the allocator's advice, for the trainer's report, not a table's cell.
    const std::string what = e.what_without_backtrace();
    const size_t allocate = what.find("allocate ");
    const size_t end = what.find(". ", allocate == std::string::npos ? 0 : allocate);
    t.error = what.substr(0, end);
    t.out_of_memory = true;
  }
  t.peak_bytes = snapshot(device).allocated_peak;
  empty_cache(device);
  return t;
}

}  // namespace

FindBatchResult find_batch(const Config& cfg, const FindBatchOptions& o) {
  if (o.mode != "power" && o.mode != "binsearch") {
    throw Error("find-batch: --mode must be power or binsearch, got '" + o.mode + "'");
  }
  if (o.steps < 1) throw Error("find-batch: --steps must be >= 1");
  if (!(o.margin >= 0.0 && o.margin < 1.0)) {
    throw Error(fmt::format("find-batch: --margin must be in [0, 1), got {}", o.margin));
  }
  const c10::Device device = resolve_device(cfg.run.device);
  if (device.is_cpu()) {
    if (cfg.memory.budget <= 0) {
      throw Error("find-batch: on the CPU nothing fails before the machine does; set "
                  "memory.budget (e.g. --set memory.budget=4GiB) to the memory to fit in");
    }
    install_cpu_tracking();
  }
  const int64_t saved_budget = cpu_budget();
  if (device.is_cpu()) set_cpu_budget(cfg.memory.budget);
  FindBatchResult r;
  // No trial past what the training split can fill.
  int64_t max_batch = o.max_batch;
  {
    const int64_t samples = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed)->size();
    const int64_t by_data = samples / std::max<int64_t>(1, cfg.strategy.accumulation);
    if (by_data < max_batch) {
      max_batch = by_data;
      r.limited_by_data = true;
    }
  }
  r.limit_bytes = memory_limit(device, cfg.memory.budget);
  const auto room = static_cast<int64_t>((1.0 - o.margin) * static_cast<double>(r.limit_bytes));
  auto run = [&](int64_t b) {
    if (o.on_trial) o.on_trial(b);
    BatchTrial t = trial(cfg, device, b, o.steps);
    if (t.fits && t.peak_bytes > room) {
      t.fits = false;
      t.error = fmt::format("peak {} over the {:g}% margin (at most {} of {})",
                            format_bytes(t.peak_bytes), o.margin * 100, format_bytes(room),
                            format_bytes(r.limit_bytes));
    }
    r.trials.push_back(t);
    return t.fits;
  };
  try {
    int64_t lo = 0, hi = 0;  // largest that fits, smallest that does not (0: none yet)
    for (int64_t b = 1; b <= max_batch; b *= 2) {
      if (run(b)) {
        lo = b;
      } else {
        hi = b;
        break;
      }
    }
    // Everything doubled fit: the limit itself, unless it was just tried.
    if (o.mode == "binsearch" && hi == 0 && lo > 0 && lo < max_batch) {
      if (run(max_batch)) {
        lo = max_batch;
      } else {
        hi = max_batch;
      }
    }
    if (o.mode == "binsearch" && hi > 0) {
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (run(mid) ? lo : hi) = mid;
      }
    }
    r.micro_batch = lo;
    if (hi > 0) r.limited_by_data = false;  // memory decided
  } catch (...) {
    set_cpu_budget(saved_budget);
    throw;
  }
  set_cpu_budget(saved_budget);
  return r;
}

BatchTrial try_micro_batch(const Config& cfg, int64_t micro_batch, int64_t steps) {
  return trial(cfg, resolve_device(cfg.run.device), micro_batch, steps);
}

Config with_micro_batch(const Config& cfg, int64_t micro_batch, bool keep_global_batch) {
  Config out = cfg;
  out.data.micro_batch_size = micro_batch;
  if (keep_global_batch && micro_batch > 0) {
    const int64_t global = cfg.data.micro_batch_size * cfg.strategy.accumulation;
    out.strategy.accumulation = std::max<int64_t>(1, (global + micro_batch - 1) / micro_batch);
  }
  return out;
}

}  // namespace frugal::memory
