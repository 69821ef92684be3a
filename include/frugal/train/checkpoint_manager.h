// A run's checkpoints, saved and resumed the same way under every strategy: the engine says
// what each rank holds (Engine::state_dict), every rank writes its shard if it has one, rank 0
// publishes the directory; a resume reads any layout (distributed/checkpoint_reader.h) after
// checking that the checkpoint belongs to this run's settings (config fingerprint, global
// batch). Keeps the newest train.keep_last.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
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

  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Every rank calls it at the same step. `data`: where the loader stands after this step.
  // With train.checkpoint_async the state is copied to host memory and written by a background
  // thread (a save still in flight is finished first: at most one); otherwise written here.
  void save(int64_t step, const LoaderPosition& data);
  // Every rank calls it after every step: publishes an asynchronous save once every rank's
  // write is done (a collective while one is in flight, nothing otherwise).
  void poll();
  // Waits for an asynchronous save in flight and publishes it (the run's end).
  void finish_pending();
  bool save_in_flight() const { return pending_ != nullptr; }
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
  // The state to save at `step`: the engine's, this rank's random generators, the meta.
  struct Snapshot;
  std::unique_ptr<Snapshot> snapshot(int64_t step, const LoaderPosition& data);
  // Writes this rank's shard (and, in a single process, publishes).
  void write(Snapshot& s) const;
  // After every rank wrote: rank 0 publishes (collective).
  void publish(Snapshot& s);

  const Config& cfg_;
  std::filesystem::path dir_;
  Engine& engine_;
  std::shared_ptr<dist::Communicator> comm_;
  std::filesystem::path last_;
  int64_t last_step_ = -1;
  // A fine-tuned run's base folder (model.init_from), file by file (hf::folder_fingerprint):
  // its checkpoints hold only what trained, so resuming needs the very same base.
  std::map<std::string, std::string> base_;
  // The asynchronous save in flight: its snapshot and the thread writing it.
  struct Pending;
  std::unique_ptr<Pending> pending_;
  // Host buffers an asynchronous save copies the state into, by part and name, kept for the
  // next save (pinned for CUDA tensors): the same tensors are copied again without new
  // allocations (whose first touch costs more than the copy). The peak is the same as with
  // fresh buffers, since a save's copy lives while its write overlaps training.
  std::map<std::string, at::Tensor> staging_;
};

}  // namespace frugal
