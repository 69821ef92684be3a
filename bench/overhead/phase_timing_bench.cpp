// What the per-phase timing (train.phase_timing, util/trace.h) costs a step, measured inside
// one process so that the machine's drift between runs cancels out: the engine trains the
// config's model on a fixed set of batches, switching the timing on and off every `block`
// steps, and each adjacent (on, off) pair of blocks gives one ratio of their median step times.
// The step is what the trainer times: the data-wait range around taking a batch, then
// Engine::step. Prints one JSON line: medians with the timing on and off, the median of the
// paired ratios and their interquartile range; and, since a step's own noise is larger than
// what is measured, the cost from its parts: the phase ranges one step opens, times what one
// range costs with the timing on and off (a million ranges timed in a row), over the step.
//   frugal_bench_phase_timing CONFIG.yaml [pairs] [block] [threads]
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <vector>

#include "frugal/config/load.h"
#include "frugal/data/batch.h"
#include "frugal/data/dataset.h"
#include "frugal/engine/engine.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"
#include "frugal/util/trace.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// Nanoseconds one phase range (opened and closed, nothing inside) costs.
double range_ns(bool timing) {
  frugal::trace::set_phase_timing(timing);
  constexpr int kRanges = 1'000'000;
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRanges; ++i) {
      frugal::trace::Range range("", frugal::trace::Phase::forward);
    }
    rounds.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                         .count() /
                     kRanges);
  }
  (void)frugal::trace::take_phase_times();
  return median(rounds);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr << "usage: frugal_bench_phase_timing CONFIG.yaml [pairs] [block] [threads]\n";
    return 2;
  }
  const int pairs = argc > 2 ? std::stoi(argv[2]) : 40;
  const int block = argc > 3 ? std::stoi(argv[3]) : 100;
  if (argc > 4) at::set_num_threads(std::stoi(argv[4]));
  const frugal::Config cfg = frugal::load_config(argv[1]);

  at::manual_seed(cfg.run.seed);
  auto model = frugal::make_model(cfg.model);
  frugal::Engine engine(
      frugal::EngineOptions{cfg.strategy, cfg.optim.clip_grad_norm, cfg.optim.in_backward});
  engine.setup(model, frugal::make_optimizer(cfg.optim, *model));
  const frugal::LossFn loss = [&](const frugal::Batch& mb) { return model->batch_loss_sum(mb); };

  // A fixed ring of batches: the data's cost is the same in both arms and not what is measured.
  auto data = frugal::make_dataset(cfg.data, cfg.model, frugal::Split::train, cfg.run.seed);
  const int64_t batch_size = cfg.data.micro_batch_size * cfg.strategy.accumulation;
  std::vector<frugal::Batch> ring;
  for (int64_t i = 0; i + batch_size <= data->size() && ring.size() < 16; i += batch_size) {
    std::vector<int64_t> rows(batch_size);
    for (int64_t j = 0; j < batch_size; ++j) rows[j] = i + j;
    ring.push_back(data->get(rows));
  }
  if (ring.empty()) throw frugal::Error("the data holds fewer samples than one batch");

  size_t next = 0;
  auto timed_step = [&] {
    const auto start = std::chrono::steady_clock::now();
    frugal::Batch batch;
    {
      frugal::trace::Range wait("data_wait", frugal::trace::Phase::data_wait);
      batch = ring[next++ % ring.size()];
    }
    engine.step(batch, loss);
    (void)frugal::trace::take_phase_times();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  // The ranges one step opens (recorded while the timing is on).
  frugal::trace::set_phase_timing(true);
  for (int i = 0; i < 2 * block; ++i) timed_step();  // warm-up
  frugal::trace::record_ranges(true);
  timed_step();
  frugal::trace::record_ranges(false);
  const size_t ranges_per_step = frugal::trace::take_recorded_ranges().size();

  std::vector<double> on_all, off_all, ratios;
  for (int pair = 0; pair < pairs; ++pair) {
    // Alternate which arm goes first, so a trend within a pair favours neither.
    std::vector<double> on, off;
    for (bool timing : {pair % 2 == 0, pair % 2 != 0}) {
      frugal::trace::set_phase_timing(timing);
      auto& into = timing ? on : off;
      for (int i = 0; i < block; ++i) into.push_back(timed_step());
    }
    ratios.push_back(median(on) / median(off));
    on_all.insert(on_all.end(), on.begin(), on.end());
    off_all.insert(off_all.end(), off.begin(), off.end());
  }
  const double on_ns = range_ns(true), off_ns = range_ns(false);
  const double parts_cost =
      static_cast<double>(ranges_per_step) * (on_ns - off_ns) * 1e-9 / median(off_all);
  nlohmann::json out = {{"config", argv[1]},
                        {"pairs", pairs},
                        {"block", block},
                        {"threads", at::get_num_threads()},
                        {"median_on_s", median(on_all)},
                        {"median_off_s", median(off_all)},
                        {"median_ratio", median(ratios)},
                        {"ratio_q25", quantile(ratios, 0.25)},
                        {"ratio_q75", quantile(ratios, 0.75)},
                        {"ranges_per_step", ranges_per_step},
                        {"range_ns_on", on_ns},
                        {"range_ns_off", off_ns},
                        {"cost_from_parts", parts_cost}};
  std::cout << out.dump() << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "frugal_bench_phase_timing: " << e.what() << "\n";
  return 2;
}
