#include "frugal/train/metrics_recorder.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "frugal/config/load.h"
#include "frugal/io/atomic_file.h"
#include "frugal/memory/cpu_history.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/stats.h"
#include "frugal/train/memory_history_file.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace frugal {
namespace {

// Every rank's step time and memory peaks, gathered into rank 0's record (a collective: all
// ranks call it at the same steps).
void add_rank_figures(dist::Communicator& comm, json& record, double seconds,
                      const memory::MemorySnapshot& mem) {
  at::Tensor mine = at::tensor({seconds, static_cast<double>(mem.allocated_peak),
                                static_cast<double>(mem.host_rss_peak)},
                               at::TensorOptions(comm.device()).dtype(at::kDouble));
  at::Tensor all = at::empty({3 * comm.size()}, mine.options());
  comm.all_gather(all, mine, /*async=*/false, "metrics");
  all = all.cpu().contiguous();
  const double* v = all.const_data_ptr<double>();  // (size, 3), row per rank
  std::vector<double> times;
  std::vector<int64_t> allocated, rss;
  for (int r = 0; r < comm.size(); ++r) {
    times.push_back(v[3 * r]);
    allocated.push_back(static_cast<int64_t>(v[3 * r + 1]));
    rss.push_back(static_cast<int64_t>(v[3 * r + 2]));
  }
  record["rank_step_time_s"] = times;
  record["rank_mem_allocated_peak_bytes"] = allocated;
  record["rank_host_rss_peak_bytes"] = rss;
}

// A record's numbers as TensorBoard scalars, each under its JSON key; true and false are 1 and
// 0 (skipped); a list of numbers, one per rank, is one tag per rank (rank_step_time_s/rank1).
std::vector<std::pair<std::string, double>> record_scalars(const json& record) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [key, value] : record.items()) {
    if (key == "step") continue;
    if (value.is_number() || value.is_boolean()) {
      out.emplace_back(key, value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>());
    } else if (value.is_array()) {
      for (size_t r = 0; r < value.size(); ++r) {
        if (value[r].is_number()) out.emplace_back(fmt::format("{}/rank{}", key, r), value[r].get<double>());
      }
    }
  }
  return out;
}

}  // namespace

MetricsRecorder::MetricsRecorder(const Config& cfg, const std::filesystem::path& run_dir,
                                 std::shared_ptr<dist::Communicator> comm, c10::Device device,
                                 int64_t resumed_from)
    : cfg_(cfg), comm_(std::move(comm)), device_(device), main_(!comm_ || comm_->is_main()) {
  if (main_) metrics_.emplace(run_dir / "metrics.jsonl", resumed_from);
  if (comm_ && cfg.train.metrics_per_rank) {
    rank_metrics_.emplace(run_dir / fmt::format("metrics.rank{}.jsonl", comm_->rank()),
                          resumed_from);
  }
  // train.tensorboard: RUN_DIR/tensorboard holds rank 0's files (the job's figures); with
  // tensorboard_ranks all, each rank writes its own into tensorboard/rank<N>/, one TensorBoard
  // run per rank (a folder's files are merged into one run, where the ranks' figures of a step
  // would collide). A resume trims each folder's events past the resumed step.
  if (cfg.train.tensorboard && (main_ || cfg.train.tensorboard_ranks == "all")) {
    fs::path dir = run_dir / "tensorboard";
    std::string suffix;
    if (comm_ && cfg.train.tensorboard_ranks == "all") {
      dir /= fmt::format("rank{}", comm_->rank());
      suffix = fmt::format(".rank{}", comm_->rank());
    }
    tensorboard_ = std::make_unique<TensorBoardWriter>(dir, suffix, resumed_from);
  }
  // memory.record_history: the allocator's events, dumped when the run ends (or runs out of
  // memory): CUDA's caching allocator's for PyTorch's memory viewer and `frugal report`, the
  // CPU tracking allocator's as JSON for `frugal report` (docs/memory.md).
  const std::string rank_part = main_ ? std::string() : fmt::format(".rank{}", comm_->rank());
  history_file_ = run_dir / (device.is_cuda() ? "memory_snapshot" + rank_part + ".pickle"
                                              : "memory_history" + rank_part + ".json");
  if (cfg.memory.record_history) {
    if (device.is_cuda()) {
      memory::start_history(device);
    } else if (memory::cpu_tracking_installed()) {
      memory::start_cpu_history(cfg.memory.history_max_events);
      // The step's phases over the same time, on the same clock, for the timeline's bands.
      trace::take_recorded_ranges();
      trace::record_ranges(true, cfg.memory.history_max_events);
    } else {
      log::info("memory.record_history: the CPU tracking allocator is not installed; nothing "
                "to record");
    }
  }
}

void MetricsRecorder::start(int64_t first_step) {
  memory::reset_peaks(device_);
  progress_.emplace(main_ ? cfg_.train.progress : "none", first_step, cfg_.train.max_steps,
                    cfg_.train.log_every);
  last_record_step_ = first_step;
  if (comm_) comm_->reset_traffic();  // setup's broadcasts are not a step's traffic
}

void MetricsRecorder::set_model_flops(double flops_per_token, int64_t tokens_per_sample) {
  throughput_.flops_per_token = flops_per_token;
  throughput_.peak = cfg_.train.peak_flops > 0 ? std::optional<double>(cfg_.train.peak_flops)
                                               : known_peak_flops(device_);
  tokens_per_sample_ = tokens_per_sample;
}

void MetricsRecorder::record(const StepStats& st) {
  const int64_t max_steps = cfg_.train.max_steps;
  const double tok_s = st.seconds > 0 ? st.targets / st.seconds : 0.0;
  // FLOPs count every position the model computes, targets or not.
  const double tokens = static_cast<double>(st.samples * tokens_per_sample_);
  const std::optional<double> mfu = throughput_.mfu(tokens, st.seconds);
  const double data_wait = st.phases[trace::Phase::data_wait];
  const double wall = st.seconds + data_wait;
  progress_->update(
      {st.step, max_steps, st.loss, st.lr, tok_s, mfu, wall > 0 ? data_wait / wall : 0.0});
  const bool log_step =
      st.step % std::max<int64_t>(1, cfg_.train.log_every) == 0 || st.step == max_steps;
  const bool monitor_step =
      cfg_.memory.monitor_every > 0 && st.step % cfg_.memory.monitor_every == 0;
  if (!log_step && !monitor_step) return;
  json record = {{"step", st.step}};
  if (log_step) {
    record.update({{"loss", st.loss},
                   {"lr", st.lr},
                   {"grad_norm", st.grad_norm},
                   {"step_time_s", st.seconds},
                   {"tokens_per_s", tok_s},
                   {"samples_per_s", st.seconds > 0 ? st.samples / st.seconds : 0.0},
                   {"loss_scale", st.loss_scale},
                   {"skipped", st.skipped}});
    // Where the step's time went (util/trace.h): the data wait before it, then forward,
    // backward, communication waits and the optimizer; the rest of step_time_s is the
    // engine's own bookkeeping.
    for (int i = 0; i < trace::kPhases && cfg_.train.phase_timing; ++i) {
      const auto phase = static_cast<trace::Phase>(i);
      record[fmt::format("time_{}_s", trace::phase_name(phase))] = st.phases[phase];
    }
    if (throughput_.flops_per_token > 0) {
      record["model_flops_per_token"] = throughput_.flops_per_token;
      record["achieved_flops"] = throughput_.achieved(tokens, st.seconds);
      if (mfu) record["mfu"] = *mfu;
    }
  }
  // Peaks cover the steps since the previous record.
  const memory::MemorySnapshot mem = memory::snapshot(device_);
  record["mem_allocated_bytes"] = mem.allocated;
  record["mem_allocated_peak_bytes"] = mem.allocated_peak;
  if (device_.is_cuda()) {
    record["mem_reserved_bytes"] = mem.reserved;
    record["mem_reserved_peak_bytes"] = mem.reserved_peak;
    record["mem_active_bytes"] = mem.active;
    record["mem_active_peak_bytes"] = mem.active_peak;
  }
  record["host_rss_bytes"] = mem.host_rss;
  record["host_rss_peak_bytes"] = mem.host_rss_peak;
  if (st.activation_host_peak_bytes >= 0) {
    record["offload_activations_host_peak_bytes"] = st.activation_host_peak_bytes;
  }
  run_peak_ = std::max(run_peak_, mem.allocated_peak);
  if (comm_) {
    // What this rank's collectives moved per step since the previous record (the training
    // step's own: the record's gathering below is not counted).
    int64_t sent = 0, payload = 0;
    for (const auto& [op, t] : comm_->traffic()) {
      sent += t.sent_bytes;
      payload += t.payload_bytes;
    }
    const int64_t steps = std::max<int64_t>(1, st.step - last_record_step_);
    record["comm_sent_bytes_per_step"] = sent / steps;
    record["comm_payload_bytes_per_step"] = payload / steps;
  }
  if (rank_metrics_) rank_metrics_->write(record.dump());
  if (tensorboard_) {
    // The resolved config once, at the first step this run records (a fenced block: the
    // text plugin renders Markdown).
    if (!config_logged_) {
      tensorboard_->add_text("config", "```yaml\n" + to_yaml(cfg_) + "```\n", st.step);
      config_logged_ = true;
    }
    // Ranks other than 0 write their own record, as metrics.rank<N>.jsonl has it; rank 0
    // writes metrics.jsonl's, with every rank's figures, below.
    if (!main_) {
      tensorboard_->add_scalars(record_scalars(record), st.step);
      tensorboard_->flush();
    }
  }
  if (comm_ && comm_->size() > 1) add_rank_figures(*comm_, record, st.seconds, mem);
  if (comm_) comm_->reset_traffic();
  last_record_step_ = st.step;
  if (metrics_) metrics_->write(record.dump());
  if (tensorboard_ && main_) {
    tensorboard_->add_scalars(record_scalars(record), st.step);
    tensorboard_->flush();
  }
  memory::reset_peaks(device_);
}

void MetricsRecorder::record_eval(int64_t step, double val_loss, bool final) {
  const double perplexity = std::exp(val_loss);
  json row{{"step", step}, {"val_loss", val_loss}, {"val_perplexity", perplexity}};
  if (final) row["final"] = true;
  if (metrics_) metrics_->write(row.dump());
  if (tensorboard_) {
    tensorboard_->add_scalar("val_loss", val_loss, step);
    tensorboard_->add_scalar("val_perplexity", perplexity, step);
    tensorboard_->flush();
  }
  if (!final) message(fmt::format("step {}: val loss {:.4f}, perplexity {:.2f}", step, val_loss, perplexity));
}

bool MetricsRecorder::histogram_step(int64_t step) const {
  const int64_t every = cfg_.train.tensorboard_histograms_every;
  return cfg_.train.tensorboard && every > 0 && step % every == 0;
}

bool MetricsRecorder::reads_gradients(int64_t step) const {
  // Decided alike on every rank, writer or not, so that all run the step the same way.
  return histogram_step(step) && !cfg_.optim.in_backward &&
         !sharding_traits(cfg_.strategy.sharding.mode).shards_gradients;
}

void MetricsRecorder::note_gradients(const torch::nn::Module& model) {
  if (tensorboard_) grad_norms_ = module_grad_norms(model);
}

void MetricsRecorder::record_histograms(const torch::nn::Module& model, int64_t step) {
  if (!tensorboard_) return;
  add_module_histograms(*tensorboard_, model, step);
  std::vector<std::pair<std::string, double>> grads;
  for (const auto& [name, norm] : grad_norms_) grads.emplace_back("grad_norm/" + name, norm);
  tensorboard_->add_scalars(grads, step);
  grad_norms_.clear();
  tensorboard_->flush();
}

void MetricsRecorder::message(const std::string& text) {
  if (progress_) progress_->message(text);
}

void MetricsRecorder::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (progress_) progress_->finish();
  if (cfg_.memory.record_history && device_.is_cuda()) {
    io::write_file_atomic(history_file_, memory::history_snapshot(device_));
  } else if (memory::cpu_history_recording()) {
    const memory::CpuHistory history = memory::stop_cpu_history();
    trace::record_ranges(false);
    io::write_file_atomic(history_file_,
                          memory_history_json(history, trace::take_recorded_ranges(),
                                              trace::dropped_ranges()));
  }
}

std::string MetricsRecorder::summary() {
  memory::MemorySnapshot mem = memory::snapshot(device_);
  mem.allocated_peak = std::max(mem.allocated_peak, run_peak_);
  return memory::summary_table(mem);
}

}  // namespace frugal
