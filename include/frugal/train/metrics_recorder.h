// What a run tells as it goes: the progress line, metrics.jsonl (rank 0's, with every rank's
// step time and memory peaks gathered into it), metrics.rank<r>.jsonl
// (train.metrics_per_rank), the allocator history (memory.record_history) and the
// memory summary at the end, and TensorBoard's event files (train.tensorboard): every number
// of each record as a scalar of the same tag, the resolved config as text, and per-module
// histograms every train.tensorboard_histograms_every steps. Every rank calls record() at
// every step: the gathering is a collective.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "frugal/config/config.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/train/metrics.h"
#include "frugal/train/progress.h"
#include "frugal/train/tensorboard.h"
#include "frugal/train/throughput.h"

namespace frugal {

class MetricsRecorder {
 public:
  // `resumed_from`: the step resumed from (-1 if fresh); lines past it are dropped.
  MetricsRecorder(const Config& cfg, const std::filesystem::path& run_dir,
                  std::shared_ptr<dist::Communicator> comm, c10::Device device,
                  int64_t resumed_from);
  // Resets the peaks and the traffic counters: what setup did is no step's.
  void start(int64_t first_step);
  // The model's FLOPs per token and the tokens of one rank's step, for throughput and MFU.
  void set_model_flops(double flops_per_token, int64_t tokens_per_sample);
  void record(const StepStats& st);
  // A validation row: val_loss (mean per token) and val_perplexity (its exp); `final` marks
  // the evaluation after the last step (logged by the trainer, no progress message).
  void record_eval(int64_t step, double val_loss, bool final = false);
  // train.tensorboard_histograms_every: whether `step` has per-module histograms (the same on
  // every rank: under zero3 every rank joins the gathering of whole parameters for them), and
  // whether its gradients are read, which needs the step in two halves
  // (Engine::forward_backward, note_gradients, Engine::optimizer_step): not where gradients
  // are sharded or freed in backward (optim.in_backward).
  bool histogram_step(int64_t step) const;
  bool reads_gradients(int64_t step) const;
  // The per-module gradient norms, between the step's halves.
  void note_gradients(const torch::nn::Module& model);
  // The histograms and norms of `step`, after its update (whole parameters in place).
  void record_histograms(const torch::nn::Module& model, int64_t step);
  // A line that does not tear the progress bar.
  void message(const std::string& text);
  // Ends the progress line and writes the allocator history (also before an error).
  void stop();
  // The memory summary of the whole run (peaks over every record), for the log.
  std::string summary();

 private:
  const Config& cfg_;
  std::shared_ptr<dist::Communicator> comm_;
  c10::Device device_;
  bool main_;
  std::optional<MetricsLog> metrics_;       // rank 0: the job's
  std::optional<MetricsLog> rank_metrics_;  // train.metrics_per_rank: this rank's own
  std::optional<Progress> progress_;
  std::filesystem::path history_file_;
  int64_t run_peak_ = 0;
  Throughput throughput_;
  int64_t tokens_per_sample_ = 0;
  int64_t last_record_step_ = 0;
  bool stopped_ = false;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // train.tensorboard, on the ranks that write
  bool config_logged_ = false;
  std::map<std::string, double> grad_norms_;  // note_gradients' figures, until recorded
};

}  // namespace frugal
