#include "frugal/train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "frugal/config/load.h"
#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/distributed/checkpoint_verify.h"
#include "frugal/distributed/communicator.h"
#include "frugal/distributed/fatal_dump.h"
#include "frugal/engine/device.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/remove_tree.h"
#include "frugal/memory/auto_policy.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/host_allocator.h"
#include "frugal/memory/stats.h"
#include "frugal/models/materialize.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/precision.h"
#include "frugal/train/checkpoint_manager.h"
#include "frugal/train/evaluator.h"
#include "frugal/train/metrics_recorder.h"
#include "frugal/train/nonfinite_guard.h"
#include "frugal/train/oom_report.h"
#include "frugal/train/run_dir.h"
#include "frugal/train/run_model.h"
#include "frugal/train/sample.h"
#include "frugal/train/step_profiler.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

bool every(int64_t period, int64_t step) { return period > 0 && step % period == 0; }

// Rank 0 tells the story; the others warn and fail. Log files close with the run.
struct RunLogScope {
  explicit RunLogScope(bool main) : quiet(!main) {
    if (quiet) log::set_level(log::Level::warn);
  }
  ~RunLogScope() {
    log::close_files();
    if (quiet) log::set_level(log::Level::info);
  }
  RunLogScope(const RunLogScope&) = delete;
  RunLogScope& operator=(const RunLogScope&) = delete;
  bool quiet;
};

// Stops the metrics (progress bar, memory history file) when the loop ends, by an error too.
struct MetricsStop {
  explicit MetricsStop(MetricsRecorder& m) : metrics(m) {}
  ~MetricsStop() {
    try {
      metrics.stop();
    } catch (const std::exception& e) {
      log::warn(std::string("stopping the metrics: ") + e.what());  // the run's error matters more
    }
  }
  MetricsStop(const MetricsStop&) = delete;
  MetricsStop& operator=(const MetricsStop&) = delete;
  MetricsRecorder& metrics;
};

}  // namespace

struct Trainer::Impl {
  Config cfg;
  dist::RankInfo job;
  std::shared_ptr<dist::Communicator> comm;  // null in a single process
  bool main = true;                          // rank 0: logs, writes shared files
  int64_t rss_at_start = 0;                  // host resident bytes before the model
  c10::Device device{c10::kCPU};
  RunDirPlan plan;
  std::shared_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<CheckpointManager> checkpoints;
  std::shared_ptr<Tokenizer> sample_tokenizer;  // the end-of-run sample's, null for bytes

  Impl(Config c, dist::RankInfo j) : cfg(std::move(c)), job(std::move(j)) {}

  // The run directory (every rank decides and fails alike; rank 0 alone creates it, the
  // others wait), the flight recorder's folder, the log file, then build(): a start that
  // fails leaves no directory of its own behind.
  void open_run(std::optional<dist::FatalDumpScope>& fatal_dump) {
    // A job's ranks verify a checkpoint together, each reading its share of it.
    CheckpointVerifier verify;
    if (comm && comm->size() > 1) {
      verify = [c = comm](const std::filesystem::path& ckpt) {
        dist::verify_checkpoint_together(*c, ckpt);
      };
    }
    plan = prepare_run_dir(cfg, /*create=*/main, verify);
    if (comm) {
      comm->barrier();
      comm->set_flight_recorder_dir(plan.dir / "flight_recorder");
      if (comm->size() > 1) fatal_dump.emplace(*comm);
    }
    if (main) {
      log::add_file((plan.dir / "train.log").string());
      for (const auto& line : plan.warnings) log::warn(line);
    }
    log::info(fmt::format("run directory: {}", plan.dir.string()));
    try {
      build();
    } catch (...) {
      // A model that cannot be built, data that cannot be read: the directory this start made
      // holds only its log, and would refuse the corrected command's rerun. The error itself
      // reaches the user on stderr.
      if (main && plan.fresh) {
        log::close_files();
        try {
          io::remove_tree(plan.created.empty() ? plan.dir : plan.created);
        } catch (const std::exception&) {
          // Left behind: the error being reported matters more.
        }
      }
      throw;
    }
  }

  // The checkpoint the run directory resumes from, if any: its step (-1 when fresh).
  int64_t resume() {
    if (!plan.resume_from) return -1;
    const CheckpointManager::Resumed resumed = checkpoints->resume(*plan.resume_from);
    loader->set_position(resumed.data);
    log::info(fmt::format("resumed from {} (step {})", plan.resume_from->string(), resumed.step));
    return resumed.step;
  }

  // After loading weights (model.init_from, a checkpoint): the most host memory building the
  // model and loading them held, against what the rank keeps, on the rank where it was
  // highest (docs/reliability.md, bounded loading). Every rank takes part. From here on the
  // C allocator follows memory.host_allocator.
  void report_load_memory(bool loaded) {
    memory::tune_host_allocator(cfg.memory.host_allocator);
    if (!loaded) return;
    const memory::MemorySnapshot m = memory::snapshot(c10::Device(c10::kCPU));
    double ratio = m.allocated > 0 ? static_cast<double>(m.allocated_peak) / m.allocated : 0.0;
    double kept = static_cast<double>(m.allocated);
    double above = static_cast<double>(memory::host_memory().rss_peak_bytes - rss_at_start);
    if (comm) {
      ratio = dist::all_reduce_scalar(*comm, ratio, dist::Reduce::kMax);
      kept = dist::all_reduce_scalar(*comm, kept, dist::Reduce::kMax);
      above = dist::all_reduce_scalar(*comm, above, dist::Reduce::kMax);
    }
    const std::string tensors =
        device.is_cpu() ? fmt::format("host tensors peaked at {:.2f}x what a rank keeps ({} kept); ",
                                      ratio, memory::format_bytes(static_cast<int64_t>(kept)))
                        : std::string();
    log::info(fmt::format("loading: {}resident memory at most {} above the run's start",
                          tensors, memory::format_bytes(static_cast<int64_t>(above))));
  }

  void train_loop(MetricsRecorder& metrics, TrainResult& result) {
    // train.profile: LibTorch's profiler over a few steps, written as a Chrome trace.
    StepProfiler profiler(cfg.train.profile, plan.dir, device, comm ? comm->rank() : 0,
                          comm ? comm->size() : 1);
    NonFiniteGuard nonfinite(
        {cfg.train.on_nonfinite, cfg.train.max_nonfinite_steps, cfg.strategy.precision});
    model->train();
    while (engine->steps_done() < cfg.train.max_steps) {
      // The step's phase times start here: what ran since (evaluation, checkpoints, the
      // metrics' gathering) is no step's.
      (void)trace::take_phase_times();
      profiler.before_step(engine->steps_done() + 1);
      Batch batch;
      {
        trace::Range data_wait("data_wait", trace::Phase::data_wait);
        batch = loader->next().to(device, /*non_blocking=*/true);
      }
      const StepStats st = step(batch, metrics);
      result.last_loss = st.loss;
      profiler.after_step(st.step);
      metrics.record(st);
      if (metrics.histogram_step(st.step)) {
        FullParameters full(engine->sharding());  // a collective: every rank takes part
        metrics.record_histograms(*model, st.step);
      }
      const std::string skipped = nonfinite.check(st, st.pipelined);
      if (!skipped.empty()) metrics.message(skipped);
      if (every(cfg.memory.empty_cache_every, st.step)) memory::empty_cache(device);
      if (every(cfg.train.eval_every, st.step)) {
        result.val_loss = evaluator->evaluate();
        metrics.record_eval(st.step, result.val_loss);
      }
      if (every(cfg.train.checkpoint_every, st.step)) {
        const auto started = std::chrono::steady_clock::now();
        save(st.step);
        // How long training stood still for it (bench/checkpoint_async reads it).
        const double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (main) {
          metrics.message(checkpoints->save_in_flight()
                              ? fmt::format("checkpoint: step {} copied in {:.3f} s, writing in the background",
                                            st.step, held)
                              : fmt::format("checkpoint: {} ({:.3f} s)", checkpoints->last().string(), held));
        }
      } else {
        checkpoints->poll();  // an asynchronous save published once every rank wrote it
      }
    }
    profiler.finish();
  }

  // After the last step: the final checkpoint and evaluation, the sample.
  void finish(MetricsRecorder& metrics, TrainResult& result) {
    result.steps = engine->steps_done();
    const bool saving_final = cfg.train.save_final && checkpoints->last_step() != result.steps &&
                              !(checkpoints->save_in_flight() && checkpoint_step_ == result.steps);
    if (saving_final) save(result.steps);
    const bool was_async = checkpoints->save_in_flight();
    checkpoints->finish_pending();  // the last asynchronous save, published before the end
    if (saving_final && !was_async) log::info(fmt::format("checkpoint: {}", checkpoints->last().string()));
    result.last_checkpoint = checkpoints->last();
    if (std::isnan(result.val_loss) && cfg.train.eval_batches > 0) {
      result.val_loss = evaluator->evaluate();
      metrics.record_eval(result.steps, result.val_loss, /*final=*/true);
    }
    if (!std::isnan(result.val_loss)) {
      log::info(fmt::format("final val loss {:.4f}, perplexity {:.2f}", result.val_loss,
                            std::exp(result.val_loss)));
    }
    if (cfg.generate.tokens > 0) {
      FullParameters full(engine->sharding());  // a collective: every rank takes part
      if (main) result.sample = sample_text(cfg, *model, device, sample_tokenizer.get());
    }
  }

  // The process: threads, counted host memory, and its place in the job (docs/distributed.md).
  void join_job() {
    if (cfg.run.threads > 0) at::set_num_threads(static_cast<int>(cfg.run.threads));
    // Every CPU tensor byte is counted from here on (memory figures in metrics, budgets).
    // Loading first returns what it frees (report_load_memory applies memory.host_allocator).
    if (cfg.memory.host_allocator != "system") memory::return_freed_blocks();
    memory::install_cpu_tracking();
    // The peaks from here: what this run's loading takes (report_load_memory), whatever ran
    // before in the process.
    memory::reset_peaks(c10::Device(c10::kCPU));
    memory::reset_host_peak();
    rss_at_start = memory::host_memory().rss_bytes;
    memory::set_cpu_budget(cfg.memory.budget);
    // Tagged before joining: a rendezvous that fails names the rank too.
    if (!job.launcher_tags_ranks) log::set_rank(job.rank, job.world_size);
    // Data-parallel modes need their collectives even in a job of one.
    if (job.distributed() || sharding_traits(cfg.strategy.sharding.mode).data_parallel) {
      comm = dist::init_from_env(cfg.distributed, job);
      main = comm->is_main();
    }
  }

  // Model, optimizer, schedule and engine (seeded first: initialisation is reproducible),
  // then the data, the evaluator and the checkpoints.
  void build() {
    at::manual_seed(cfg.run.seed);
    device = resolve_device(cfg.run.device, job.local_rank);
    // The step's ranges show in Nsight Systems on a GPU (a no-op when no tool listens).
    trace::enable_nvtx(device.is_cuda());
    trace::set_phase_timing(cfg.train.phase_timing);
    // Decided here, so that config.resolved.yaml and the checkpoints record the choice.
    const std::string precision = resolve_precision(cfg.strategy.precision, device);
    if (precision != cfg.strategy.precision) {
      log::info(fmt::format("strategy.precision auto: {} on {}", precision, device.str()));
      cfg.strategy.precision = precision;
    }
    // A folder's config.json is taken at its word only where its weights agree, before any
    // model of its sizes is built (here, or traced for the activation policy).
    if (!cfg.model.init_from.empty()) hf::check_architecture(cfg.model, cfg.model.init_from);
    // An adapter folder's settings too (model.init_adapter against model.lora).
    if (!cfg.model.init_adapter.empty()) hf::check_adapter_config(cfg.model, cfg.model.init_adapter);
    // The same for the activation policy, from the budget and this model's traced step.
    memory::resolve_auto_checkpointing(cfg, device, job.world_size);
    // zero3 (a mode that shards parameters) keeps a shard of each parameter per rank: its ranks
    // take their slices of the weights after setup, each reading only what it keeps; the others
    // load whole tensors. (A fine-tuned model's frozen base is whole on every rank: it loads before
    // setup.)
    const bool weights_after_setup =
        !cfg.model.init_from.empty() &&
        sharding_traits(cfg.strategy.sharding.mode).shards_parameters && !finetuning(cfg.model);
    // The model as export rebuilds it (train/run_model.h): seeded, the base's weights, the
    // adapters and frozen parameters on it, the adapters' starting values.
    RunModelOptions build_options;
    build_options.load_init_from = !weights_after_setup;
    // Those ranks build the model's shapes alone: no whole model, no random values that the
    // folder's would replace.
    build_options.on_meta = weights_after_setup;
    model = build_run_model(cfg, build_options);
    if (weights_after_setup) materialize_without_values(*model, device);
    if (!cfg.model.init_from.empty() && !weights_after_setup) {
      log::info(fmt::format("weights from {}", cfg.model.init_from));
    }
    if (!cfg.model.init_adapter.empty()) {
      log::info(fmt::format("adapters from {}", cfg.model.init_adapter));
    }
    if (const PrecisionSpec spec = precision_spec(cfg.strategy.precision);
        spec.autocast && frozen_weights_follow_autocast(cfg.model)) {
      const int64_t saved = store_frozen_linear_weights(*model, spec.dtype);
      if (saved > 0) {
        log::info(
            fmt::format("frozen linear weights stored in {} (model.frozen_dtype auto under "
                        "{}): {:.1f} MiB saved",
                        c10::toString(spec.dtype), cfg.strategy.precision, saved / 1048576.0));
      }
    }
    model->to(device);
    auto optimizer = make_optimizer(cfg.optim, *model);
    auto schedule = std::make_shared<LrSchedule>(cfg.schedule, cfg.optim.lr, cfg.train.max_steps);
    engine = std::make_unique<Engine>(
        EngineOptions{cfg.strategy, cfg.optim.clip_grad_norm, cfg.optim.in_backward}, comm);
    engine->setup(model, optimizer, schedule);
    if (weights_after_setup) {
      engine->load_state_dict(*hf::weights_state(*model, cfg.model.init_from));
      log::info(fmt::format("weights from {} (this rank's shards)", cfg.model.init_from));
    }
    const ParameterCounts counts = count_parameters(*model);
    if (counts.frozen == 0) {
      log::info(fmt::format("model {}: {:.3f}M parameters on {}", cfg.model.type,
                            counts.trainable / 1e6, device.str()));
    } else {
      log::info(fmt::format("model {}: {:.3f}M parameters on {}, {:.3f}M trainable ({:.2f}%)",
                            cfg.model.type, (counts.trainable + counts.frozen) / 1e6,
                            device.str(), counts.trainable / 1e6,
                            100.0 * counts.trainable / (counts.trainable + counts.frozen)));
    }

    auto train_data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
    LoaderOptions lopts;
    lopts.batch_size = micro_batch_items(cfg.data) * cfg.strategy.accumulation;
    lopts.shuffle = cfg.data.shuffle;
    lopts.seed = cfg.run.seed;
    lopts.num_workers = cfg.data.num_workers;
    lopts.pin_memory = cfg.data.pin_memory;
    // Each rank reads its own slice of every global batch (micro_batch_size x accumulation x
    // world_size samples).
    lopts.rank = comm ? comm->rank() : 0;
    lopts.world_size = comm ? comm->size() : 1;
    loader = std::make_unique<DataLoader>(train_data, lopts);
    if (loader->batches_per_epoch() < 1) {
      // In the words of the job: a rank's share times the ranks, each share in its keys.
      const std::string per_rank =
          fmt::format("data.micro_batch_size {} x strategy.accumulation {}",
                      cfg.data.micro_batch_size, cfg.strategy.accumulation);
      throw Error(
          lopts.world_size > 1
              ? fmt::format("data: the training split has {} samples, fewer than one global batch "
                            "of {} = {} per rank x {} ranks ({} per rank)",
                            train_data->size(), lopts.batch_size * lopts.world_size,
                            lopts.batch_size, lopts.world_size, per_rank)
              : fmt::format("data: the training split has {} samples, fewer than one batch of {} "
                            "({})",
                            train_data->size(), lopts.batch_size, per_rank));
    }
    evaluator = std::make_unique<Evaluator>(
        cfg, make_dataset(cfg.data, cfg.model, Split::val, cfg.run.seed), *model,
        engine->sharding(), device);
    checkpoints = std::make_unique<CheckpointManager>(cfg, plan.dir / "checkpoints", *engine, comm);
    if (cfg.generate.tokens > 0) sample_tokenizer = frugal::sample_tokenizer(cfg);
  }

  // One optimizer step; out of memory ends the run with a report and advice, the
  // checkpoints as they were.
  StepStats step(const Batch& batch, MetricsRecorder& metrics) {
    const int64_t state_bytes = memory::snapshot(device).allocated;
    const LossFn loss_fn = [this](const Batch& mb) { return model->batch_loss_sum(mb); };
    try {
      if (!metrics.reads_gradients(engine->steps_done() + 1)) return engine->step(batch, loss_fn);
      // TensorBoard's per-module gradient norms: read between the step's halves, before the
      // update zeroes the gradients.
      engine->forward_backward(batch, loss_fn);
      metrics.note_gradients(*model);
      return engine->optimizer_step();
    } catch (const c10::OutOfMemoryError& e) {
      metrics.stop();
      throw Error(out_of_memory_report(
          OomContext{cfg, device, state_bytes, comm ? comm->size() : 1,
                     engine->steps_done() + 1, checkpoints->last()},
          e.what_without_backtrace(), *model));
    }
  }

  void save(int64_t step) {
    checkpoints->save(step, loader->position());
    checkpoint_step_ = step;
  }
  int64_t checkpoint_step_ = -1;  // the step of the newest save started (async: maybe in flight)
};

Trainer::Trainer(Config cfg, dist::RankInfo job)
    : impl_(std::make_unique<Impl>(std::move(cfg), std::move(job))) {}
Trainer::~Trainer() = default;

TrainResult Trainer::run() {
  Impl& s = *impl_;
  const Config& cfg = s.cfg;
  s.join_job();
  const RunLogScope log_scope(s.main);
  // A rank stopped by a signal, or by a failure no caller can catch, still leaves its
  // collectives' record in the run directory (distributed/fatal_dump.h).
  std::optional<dist::FatalDumpScope> fatal_dump;
  s.open_run(fatal_dump);

  TrainResult result;
  result.run_dir = s.plan.dir;
  result.is_main = s.main;
  result.resumed_from = s.resume();
  s.report_load_memory(result.resumed_from >= 0 || !cfg.model.init_from.empty());
  // Only now, with any resume verified, does anything in the run directory change.
  if (s.main) io::write_file_atomic(s.plan.dir / "config.resolved.yaml", to_yaml(cfg));
  MetricsRecorder metrics(cfg, s.plan.dir, s.comm, s.device, result.resumed_from);
  const int64_t T = resolved_seq_len(cfg.data, cfg.model);
  metrics.set_model_flops(s.model->flops_per_token(T), T);
  metrics.start(s.engine->steps_done());
  {
    const MetricsStop stop_metrics(metrics);  // the progress bar and memory history, however
                                              // the loop ends
    s.train_loop(metrics, result);
  }
  log::info(metrics.summary());
  s.finish(metrics, result);
  return result;
}

}  // namespace frugal
