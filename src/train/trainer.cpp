#include "frugal/train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

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
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
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

struct Trainer::Impl {
  Config cfg;
  dist::RankInfo job;
  std::shared_ptr<dist::Communicator> comm;  // null in a single process
  bool main = true;                          // rank 0: logs, writes shared files
  c10::Device device{c10::kCPU};
  RunDirPlan plan;
  std::shared_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<CheckpointManager> checkpoints;
  std::shared_ptr<Tokenizer> sample_tokenizer;  // the end-of-run sample's, null for bytes

  Impl(Config c, dist::RankInfo j) : cfg(std::move(c)), job(std::move(j)) {}

  // The process: threads, counted host memory, and its place in the job (docs/distributed.md).
  void join_job() {
    if (cfg.run.threads > 0) at::set_num_threads(static_cast<int>(cfg.run.threads));
    // Every CPU tensor byte is counted from here on (memory figures in metrics, budgets).
    memory::tune_host_allocator(cfg.memory.host_allocator);
    memory::install_cpu_tracking();
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
    if (cfg.strategy.precision == "auto") {
      // Decided here, so that config.resolved.yaml and the checkpoints record the choice.
      cfg.strategy.precision = auto_precision(device);
      log::info(fmt::format("strategy.precision auto: {} on {}", cfg.strategy.precision, device.str()));
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
    model = build_run_model(cfg, build_options);
    if (!cfg.model.init_from.empty() && !weights_after_setup) {
      log::info(fmt::format("weights from {}", cfg.model.init_from));
    }
    if (!cfg.model.init_adapter.empty()) {
      log::info(fmt::format("adapters from {}", cfg.model.init_adapter));
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

  void save(int64_t step) { checkpoints->save(step, loader->position()); }
};

namespace {
bool every(int64_t period, int64_t step) { return period > 0 && step % period == 0; }
}  // namespace

Trainer::Trainer(Config cfg, dist::RankInfo job)
    : impl_(std::make_unique<Impl>(std::move(cfg), std::move(job))) {}
Trainer::~Trainer() = default;

TrainResult Trainer::run() {
  Impl& s = *impl_;
  const Config& cfg = s.cfg;
  s.join_job();
  // Rank 0 tells the story; the others warn and fail. Log files close with the run.
  struct LogScope {
    bool quiet;
    ~LogScope() {
      log::close_files();
      if (quiet) log::set_level(log::Level::info);
    }
  } log_scope{!s.main};
  if (!s.main) log::set_level(log::Level::warn);

  // Every rank decides (and fails) alike; rank 0 alone creates, and the others wait for it.
  // A job's ranks verify a checkpoint together, each reading its share of it.
  CheckpointVerifier verify;
  if (s.comm && s.comm->size() > 1) {
    verify = [comm = s.comm](const std::filesystem::path& ckpt) {
      dist::verify_checkpoint_together(*comm, ckpt);
    };
  }
  s.plan = prepare_run_dir(cfg, /*create=*/s.main, verify);
  // A rank stopped by a signal, or by a failure no caller can catch, still leaves its
  // collectives' record in the run directory (distributed/fatal_dump.h).
  std::optional<dist::FatalDumpScope> fatal_dump;
  if (s.comm) {
    s.comm->barrier();
    s.comm->set_flight_recorder_dir(s.plan.dir / "flight_recorder");
    if (s.comm->size() > 1) fatal_dump.emplace(*s.comm);
  }
  if (s.main) log::add_file((s.plan.dir / "train.log").string());
  if (s.main) {
    for (const auto& line : s.plan.warnings) log::warn(line);
  }
  log::info(fmt::format("run directory: {}", s.plan.dir.string()));
  try {
    s.build();
  } catch (...) {
    // A model that cannot be built, data that cannot be read: the directory this start made
    // holds only its log, and would refuse the corrected command's rerun. The error itself
    // reaches the user on stderr.
    if (s.main && s.plan.fresh) {
      log::close_files();
      try {
        io::remove_tree(s.plan.created.empty() ? s.plan.dir : s.plan.created);
      } catch (const std::exception&) {
        // Left behind: the error being reported matters more.
      }
    }
    throw;
  }

  TrainResult result;
  result.run_dir = s.plan.dir;
  result.is_main = s.main;
  if (s.plan.resume_from) {
    const CheckpointManager::Resumed resumed = s.checkpoints->resume(*s.plan.resume_from);
    s.loader->set_position(resumed.data);
    result.resumed_from = resumed.step;
    log::info(fmt::format("resumed from {} (step {})", s.plan.resume_from->string(), resumed.step));
  }
  // Only now, with any resume verified, does anything in the run directory change.
  if (s.main) io::write_file_atomic(s.plan.dir / "config.resolved.yaml", to_yaml(cfg));
  MetricsRecorder metrics(cfg, s.plan.dir, s.comm, s.device, result.resumed_from);

  {
    const int64_t T = resolved_seq_len(cfg.data, cfg.model);
    metrics.set_model_flops(s.model->flops_per_token(T), T);
  }
  metrics.start(s.engine->steps_done());
  // train.profile: LibTorch's profiler over a few steps, written as a Chrome trace.
  StepProfiler profiler(cfg.train.profile, s.plan.dir, s.device, s.comm ? s.comm->rank() : 0,
                        s.comm ? s.comm->size() : 1);
  NonFiniteGuard nonfinite({cfg.train.on_nonfinite, cfg.train.max_nonfinite_steps,
                            cfg.strategy.precision});
  s.model->train();
  while (s.engine->steps_done() < cfg.train.max_steps) {
    // The step's phase times start here: what ran since (evaluation, checkpoints, the
    // metrics' gathering) is no step's.
    (void)trace::take_phase_times();
    profiler.before_step(s.engine->steps_done() + 1);
    Batch batch;
    {
      trace::Range data_wait("data_wait", trace::Phase::data_wait);
      batch = s.loader->next().to(s.device, /*non_blocking=*/true);
    }
    const StepStats st = s.step(batch, metrics);
    result.last_loss = st.loss;
    profiler.after_step(st.step);
    metrics.record(st);
    if (metrics.histogram_step(st.step)) {
      FullParameters full(s.engine->sharding());  // a collective: every rank takes part
      metrics.record_histograms(*s.model, st.step);
    }
    try {
      const std::string skipped = nonfinite.check(st, st.pipelined);
      if (!skipped.empty()) metrics.message(skipped);
    } catch (const Error&) {
      metrics.stop();
      throw;
    }
    if (every(cfg.memory.empty_cache_every, st.step)) memory::empty_cache(s.device);
    if (every(cfg.train.eval_every, st.step)) {
      result.val_loss = s.evaluator->evaluate();
      metrics.record_eval(st.step, result.val_loss);
    }
    if (every(cfg.train.checkpoint_every, st.step)) {
      s.save(st.step);
      if (s.main) metrics.message(fmt::format("checkpoint: {}", s.checkpoints->last().string()));
    }
  }
  profiler.finish();
  metrics.stop();
  log::info(metrics.summary());

  result.steps = s.engine->steps_done();
  if (cfg.train.save_final && s.checkpoints->last_step() != result.steps) {
    s.save(result.steps);
    log::info(fmt::format("checkpoint: {}", s.checkpoints->last().string()));
  }
  result.last_checkpoint = s.checkpoints->last();
  if (std::isnan(result.val_loss) && cfg.train.eval_batches > 0) {
    result.val_loss = s.evaluator->evaluate();
    metrics.record_eval(result.steps, result.val_loss, /*final=*/true);
  }
  if (!std::isnan(result.val_loss)) {
    log::info(fmt::format("final val loss {:.4f}, perplexity {:.2f}", result.val_loss,
                          std::exp(result.val_loss)));
  }
  if (cfg.generate.tokens > 0) {
    FullParameters full(s.engine->sharding());  // a collective: every rank takes part
    if (s.main) result.sample = sample_text(cfg, *s.model, s.device, s.sample_tokenizer.get());
  }
  return result;
}

}  // namespace frugal
