#include "frugal/memory/planner.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/engine/device.h"
#include "frugal/engine/engine.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/stats.h"
#include "frugal/models/blocks.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/precision.h"

namespace frugal::memory {
namespace {

std::string key(const std::string& precision, const std::string& checkpointing) {
  return precision + "/" + checkpointing;
}

// Optimizer state per parameter, in bytes.
int64_t state_per_param(const std::string& optimizer, double momentum) {
  if (optimizer == "sgd") return momentum > 0 ? 4 : 0;
  return 8;  // adam, adamw: two fp32 moments
}

}  // namespace

ModelProfile profile_model(const Config& cfg) {
  const c10::Device device = resolve_device(cfg.run.device);
  if (device.is_cpu()) install_cpu_tracking();
  ModelProfile p;
  p.host_is_device = device.is_cpu();
  p.measured_batch = cfg.data.micro_batch_size;
  {
    auto model = make_model(cfg.model);
    for (const auto& t : model->parameters()) p.params += t.numel();
    int64_t in_blocks = 0;
    if (!model->block_lists().empty()) {
      for (const Block& b : list_blocks(*model, model->block_lists(), "plan")) {
        int64_t n = 0;
        for (const auto& t : b.module->parameters()) n += t.numel();
        p.largest_block = std::max(p.largest_block, n);
        in_blocks += n;
      }
    }
    p.root = p.params - in_blocks;
  }
  for (const std::string precision : {"fp32", "bf16-mixed"}) {
    for (const std::string checkpointing : {"none", "full"}) {
      at::manual_seed(cfg.run.seed);
      auto model = make_model(cfg.model);
      model->to(device);
      StrategyConfig sc;
      sc.precision = precision;
      sc.checkpointing.policy = checkpointing;
      OptimConfig sgd;  // no state: the step adds nothing to the measurement
      sgd.type = "sgd";
      Engine engine(EngineOptions{sc, 0.0});
      engine.setup(model, make_optimizer(sgd, *model));
      auto data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
      LoaderOptions lo;
      lo.batch_size = cfg.data.micro_batch_size;
      lo.num_workers = 0;
      DataLoader loader(data, lo);
      Batch batch = loader.next().to(device);
      const int64_t before = snapshot(device).allocated;
      reset_peaks(device);
      engine.step(batch, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
      const int64_t peak = snapshot(device).allocated_peak;
      p.activations[key(precision, checkpointing)] = std::max<int64_t>(0, peak - before - 4 * p.params);
    }
  }
  return p;
}

int64_t predict_peak(const ModelProfile& p, const PlanRow& r, int world) {
  const double n = std::max(1, world);
  const double psi = static_cast<double>(p.params);
  const double unit = static_cast<double>(std::max(p.largest_block, p.root));
  double params = 4 * psi, grads = 4 * psi;
  double state = state_per_param(r.optimizer, 0.9) * psi;
  const ShardingTraits sharding = sharding_traits(r.sharding);
  if (sharding.shards_optimizer_state) state /= n;
  if (sharding.shards_gradients) {
    grads = grads / n + 4 * unit;  // one unit's whole gradients before their reduce-scatter
  }
  if (sharding.shards_parameters) {
    // The shards, plus the root unit and two blocks gathered at once (prefetch 1).
    params = params / n + 4.0 * static_cast<double>(p.root + 2 * p.largest_block);
  }
  double offloaded = 0;
  if (r.offload) {
    // Host masters of what this rank steps, their gradients and the state move off the device.
    // A rank steps the parameters whose optimizer state it holds.
    const double stepped = sharding.shards_optimizer_state ? psi / n : psi;
    offloaded = 8 * stepped + state;
    state = 0;
  }
  auto it = p.activations.find(key(r.precision, r.checkpointing));
  const double act = it == p.activations.end() || p.measured_batch == 0
                         ? 0.0
                         : static_cast<double>(it->second) * r.micro_batch / p.measured_batch;
  double peak = params + grads + state + act;
  if (p.host_is_device) peak += offloaded;  // CPU runs: the host is the device
  return static_cast<int64_t>(peak);
}

std::vector<PlanRow> plan(const Config& cfg, const ModelProfile& profile, const PlanOptions& o) {
  std::vector<int64_t> batches = o.micro_batches;
  if (batches.empty()) {
    const int64_t b = cfg.data.micro_batch_size;
    for (int64_t m : {std::max<int64_t>(1, b / 2), b, 2 * b, 4 * b}) {
      if (std::find(batches.begin(), batches.end(), m) == batches.end()) batches.push_back(m);
    }
  }
  std::vector<std::string> shardings = {"none"};
  if (o.gpus > 1) shardings = {"ddp", "zero1", "zero2", "zero3"};
  std::vector<PlanRow> rows;
  for (const std::string precision : {"fp32", "bf16-mixed"}) {
    for (const std::string ckpt : {"none", "full"}) {
      for (const auto& sharding : shardings) {
        for (bool offload : {false, true}) {
          for (const std::string optimizer : {"adamw", "sgd"}) {
            for (int64_t b : batches) {
              PlanRow r{precision, ckpt, sharding, offload, optimizer, b};
              r.peak_bytes = predict_peak(profile, r, o.gpus);
              r.fits = r.peak_bytes <= o.gpu_memory;
              // Relative time per sample: an estimate for ranking, not a measurement. bf16
              // runs the matmuls at twice fp32's rate on tensor cores; full checkpointing
              // adds a forward (~1.35x, docs/benchmarks.md); sharding adds communication,
              // offload a host step; small micro-batches pay fixed per-step costs.
              const PrecisionSpec spec = precision_spec(precision);
              const ShardingTraits traits = sharding_traits(sharding);
              double t = spec.autocast && spec.dtype == at::kBFloat16 ? 0.55 : 1.0;
              if (checkpointing_kind(ckpt) == CheckpointingKind::full) t *= 1.35;
              if (traits.shards_parameters) {
                t *= 1.10;  // gathers every unit's parameters in forward and again in backward
              } else if (traits.shards_optimizer_state) {
                t *= 1.02;  // gathers the stepped parameters once per step
              }
              if (offload) t *= 1.3;
              t *= 1.0 + 4.0 / static_cast<double>(b);
              r.time_per_sample = t;
              rows.push_back(r);
            }
          }
        }
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    return a.time_per_sample < b.time_per_sample;
  });
  return rows;
}

}  // namespace frugal::memory
