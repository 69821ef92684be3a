// The Trainer around the engine: builds model, data, optimizer and schedule from a Config,
// prepares the run directory, resumes, and runs the loop with evaluation, metrics, progress,
// checkpoints and, for language models, a text sample at the end.
#pragma once

#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/distributed/env.h"
#include "frugal/engine/engine.h"
#include "frugal/models/model.h"

namespace frugal {

struct TrainResult {
  bool is_main = true;  // rank 0 (or the only process): the one that reports
  std::filesystem::path run_dir;
  int64_t steps = 0;           // optimizer steps done in total (resumed ones included)
  int64_t resumed_from = -1;   // step of the checkpoint it started from, -1 if fresh
  double last_loss = std::numeric_limits<double>::quiet_NaN();  // train loss of the last step
  double val_loss = std::numeric_limits<double>::quiet_NaN();   // last evaluation, if any
  std::string sample;          // generated text (generate.tokens > 0, byte-level GPT)
  std::filesystem::path last_checkpoint;
};

class Trainer {
 public:
  // `job`: this process's place in a multi-process job, as the launcher set it up
  // (dist::rank_info_from_env(), which the CLI reads); a single process by default.
  explicit Trainer(Config cfg, dist::RankInfo job = {});
  ~Trainer();
  TrainResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal
