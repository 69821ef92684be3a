// A run's checkpoints, saved and resumed the same way under every strategy: the engine says
// what each rank holds (Engine::state_dict), every rank writes its shard if it has one, rank 0
// publishes the directory; a resume reads any layout (distributed/checkpoint_reader.h) after
// checking that the checkpoint belongs to this run's settings (config fingerprint, global
// batch). Keeps the newest train.keep_last.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/data/loader.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"

namespace frugal {

class CheckpointManager {
 public:
  // `dir`: the run's checkpoints/ folder. `comm`: null in a single process.
  CheckpointManager(const Config& cfg, std::filesystem::path dir, Engine& engine,
                    std::shared_ptr<dist::Communicator> comm);

  // Every rank calls it at the same step. `data`: where the loader stands after this step.
  void save(int64_t step, const LoaderPosition& data);
  struct Resumed {
    int64_t step = 0;
    LoaderPosition data;
  };
  // Restores the engine (parameters, optimizer, loss scaler, steps done) and this rank's
  // random generators from the checkpoint directory `from`, written under any layout.
  Resumed resume(const std::filesystem::path& from);

  // The newest checkpoint written or resumed from (empty before either), and its step.
  const std::filesystem::path& last() const { return last_; }
  int64_t last_step() const { return last_step_; }

 private:
  // Samples per optimizer step over the whole job: what a resume must keep (the cut into
  // micro-batches, accumulation and ranks may change).
  int64_t global_batch() const;
  // Every rank's parameters finite (a collective).
  bool parameters_finite() const;
  void barrier() const;

  const Config& cfg_;
  std::filesystem::path dir_;
  Engine& engine_;
  std::shared_ptr<dist::Communicator> comm_;
  std::filesystem::path last_;
  int64_t last_step_ = -1;
  // A fine-tuned run's base folder (model.init_from), file by file (hf::folder_fingerprint):
  // its checkpoints hold only what trained, so resuming needs the very same base.
  std::map<std::string, std::string> base_;
};

}  // namespace frugal
