#include "frugal/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "frugal/config/load.h"
#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/distributed/communicator.h"
#include "frugal/distributed/env.h"
#include "frugal/distributed/sharded_state.h"
#include "frugal/distributed/zero_sharding.h"
#include "frugal/engine/device.h"
#include "frugal/engine/state.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/checkpoint.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/host_allocator.h"
#include "frugal/memory/oom_advice.h"
#include "frugal/memory/stats.h"
#include "frugal/models/gpt.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/train/metrics.h"
#include "frugal/train/progress.h"
#include "frugal/train/run_dir.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {

struct Trainer::Impl {
  Config cfg;
  std::shared_ptr<dist::Communicator> comm;  // null in a single process
  bool main = true;                          // rank 0: logs, writes shared files
  c10::Device device{c10::kCPU};
  RunDirPlan plan;
  std::shared_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<Dataset> val_data;
  std::unique_ptr<DataLoader> loader;
  fs::path last_checkpoint;
  int64_t last_checkpoint_step = -1;

  explicit Impl(Config c) : cfg(std::move(c)) {}

  LossFn loss_fn() {
    return [this](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); };
  }

  // Mean loss per target over up to eval_batches batches of the validation split.
  double evaluate() {
    if (!val_data || val_data->size() < cfg.data.micro_batch_size) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    LoaderOptions opts;
    opts.batch_size = cfg.data.micro_batch_size;
    opts.shuffle = false;
    opts.num_workers = 0;
    DataLoader val_loader(val_data, opts);
    const int64_t batches = std::min(cfg.train.eval_batches, val_loader.batches_per_epoch());
    torch::NoGradGuard no_grad;
    FullParameters full(engine->sharding());  // zero3: whole parameters for the evaluation
    model->eval();
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < batches; ++i) {
      Batch b = val_loader.next().to(device, /*non_blocking=*/true);
      sum += model->loss_sum(model->forward(b.x), b.y).item<double>();
      count += b.num_targets();
    }
    model->train();
    return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
  }

  // Samples per optimizer step over the whole job: what a resume must keep (the cut into
  // micro-batches, accumulation and ranks may change).
  int64_t global_batch() const {
    return cfg.data.micro_batch_size * cfg.strategy.accumulation * (comm ? comm->size() : 1);
  }

  // The sharded modes (zero1/2/3) write sharded checkpoints; null for the others.
  dist::ZeroSharding* fsdp() { return dynamic_cast<dist::ZeroSharding*>(&engine->sharding()); }

  // Data parallel ranks hold the same state: rank 0 writes it, the others wait for it.
  // Sharded ranks each write their own shard.
  void save(int64_t step) {
    if (auto* f = fsdp()) {
      write_sharded_checkpoint(*f, step);
    } else if (main) {
      Checkpoint ckpt = checkpoint_at(step, {});
      ckpt.optimizer = optimizer_state(engine->optimizer());
      ckpt.state = rng_state();
      for (auto& t : engine->precision().state()) ckpt.state.push_back(std::move(t));
      last_checkpoint = save_checkpoint(plan.dir / "checkpoints", ckpt, cfg.train.keep_last);
    }
    last_checkpoint_step = step;
    if (comm) comm->barrier();
  }

  // What every checkpoint holds: the model's tensors (but `skip`), the scaler, the meta.
  Checkpoint checkpoint_at(int64_t step, const std::set<std::string>& skip, json extra = {}) {
    Checkpoint ckpt;
    ckpt.step = step;
    ckpt.model = module_state(*model, skip);
    ckpt.state = engine->precision().state();
    const LoaderPosition pos = loader->position();
    json meta = {{"step", step},
                 {"data", {{"epoch", pos.epoch}, {"batch", pos.batch}}},
                 {"global_batch", global_batch()},
                 {"fingerprint", config_fingerprint(cfg)},
                 {"config", to_yaml(cfg)}};
    if (!extra.is_null()) meta.update(extra);
    ckpt.meta_json = meta.dump(2);
    return ckpt;
  }

  // Where the optimizer keeps a shard's state (its host master under offload).
  dist::ZeroSharding::StateHolder state_holder() {
    return [this](const at::Tensor& t) { return engine->optimizer_param(t); };
  }

  void write_sharded_checkpoint(dist::ZeroSharding& f, int64_t step) {
    const fs::path dir = plan.dir / "checkpoints";
    if (main) begin_sharded_checkpoint(dir, step);
    comm->barrier();
    NamedTensors shard = f.shard_tensors(engine->optimizer(), state_holder());
    for (auto& t : rng_state()) shard.push_back(std::move(t));  // each rank draws its own
    write_checkpoint_shard(dir, step, comm->rank(), comm->size(), shard);
    comm->barrier();
    if (main) {
      const auto names = f.sharded_parameter_names();
      Checkpoint ckpt = checkpoint_at(step, {names.begin(), names.end()},
                                      {{"sharding", json::parse(layout_to_json(f.layout()))}});
      last_checkpoint = publish_sharded_checkpoint(dir, ckpt, comm->size(), cfg.train.keep_last);
    }
  }

  int64_t resume(const fs::path& from) {
    auto* f = fsdp();
    Checkpoint ckpt = load_checkpoint(from, f ? std::optional<int>(comm->rank()) : std::nullopt);
    json meta;
    try {
      meta = json::parse(ckpt.meta_json);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: corrupt meta.json ({})", (from / "meta.json").string(), e.what()));
    }
    const std::string theirs = meta.value("fingerprint", std::string());
    const std::string ours = config_fingerprint(cfg);
    if (theirs != ours) {
      throw Error(fmt::format(
          "run.resume: checkpoint '{}' was written with different model/data/optim/schedule/"
          "strategy settings (fingerprint {} vs {}); restore them or start a new run.name",
          from.string(), theirs, ours));
    }
    const int64_t saved_batch = meta.value("global_batch", global_batch());
    if (saved_batch != global_batch()) {
      throw Error(fmt::format(
          "run.resume: checkpoint '{}' trained on global batches of {} samples, this run's are "
          "{} (data.micro_batch_size {} x strategy.accumulation {} x {} ranks); keep the product",
          from.string(), saved_batch, global_batch(), cfg.data.micro_batch_size,
          cfg.strategy.accumulation, comm ? comm->size() : 1));
    }
    if (meta.contains("sharding") != (f != nullptr)) {
      throw Error(
          f ? fmt::format("run.resume: checkpoint '{}' is whole (written without sharding); "
                          "strategy.sharding.mode {} resumes sharded checkpoints only: resume it "
                          "under none or ddp",
                          from.string(), cfg.strategy.sharding.mode)
            : fmt::format("run.resume: checkpoint '{}' is sharded ({} ranks); resume it with "
                          "strategy.sharding.mode zero1, zero2 or zero3 at any world size, or "
                          "consolidate it with `frugal export`",
                          from.string(), ckpt.shard_world));
    }
    if (f) {
      const dist::ShardLayout saved =
          dist::layout_from_json(meta["sharding"].dump(), (from / "meta.json").string());
      const bool same_cut = saved.world_size == comm->size() && saved.flats == f->layout().flats;
      if (!same_cut) ckpt = load_checkpoint(from);  // resharding reads every rank's shard
      f->load_shards(saved, ckpt.shards, engine->optimizer(), state_holder());
      const auto names = f->sharded_parameter_names();
      load_module_state(*model, ckpt.model, (from / "model.pt").string(), {names.begin(), names.end()});
      if (same_cut) {
        load_rng_state(ckpt.shards.front());
      } else {
        log::info(fmt::format("resharded {} ranks' checkpoint onto {}: random generators restart "
                              "from run.seed", saved.world_size, comm->size()));
      }
    } else {
      load_module_state(*model, ckpt.model, (from / "model.pt").string());
      load_optimizer_state(engine->optimizer(), ckpt.optimizer, (from / "optimizer.pt").string());
      load_rng_state(ckpt.state);
    }
    engine->precision().load_state(ckpt.state);
    engine->reload_parameters();  // offloaded masters take the restored values
    engine->set_steps_done(ckpt.step);
    LoaderPosition pos;
    pos.epoch = meta["data"].value("epoch", int64_t{0});
    pos.batch = meta["data"].value("batch", int64_t{0});
    loader->set_position(pos);
    last_checkpoint = from;
    last_checkpoint_step = ckpt.step;
    return ckpt.step;
  }

  std::string sample_text() {
    auto gpt = std::dynamic_pointer_cast<Gpt>(model);
    if (!gpt || cfg.generate.tokens <= 0) return {};
    if (gpt->options().vocab_size != 256) {
      log::info("generate: skipped (text sampling needs a byte-level model, vocab_size 256)");
      return {};
    }
    std::string prompt = cfg.generate.prompt.empty() ? std::string("\n") : cfg.generate.prompt;
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    for (auto& id : ids) id = static_cast<unsigned char>(id);
    at::Tensor idx = at::tensor(ids, at::kLong).unsqueeze(0).to(device);  // (1, T0)
    // Sampling draws on the model's device: a seeded CPU generator, or CUDA's default one.
    at::Generator gen = device.is_cpu() ? at::make_generator<at::CPUGeneratorImpl>(cfg.run.seed)
                                        : at::globalContext().defaultGenerator(device);
    if (!device.is_cpu()) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(cfg.run.seed);
    }
    at::Tensor out = gpt->generate(idx, cfg.generate.tokens, cfg.generate.temperature,
                                   cfg.generate.top_k, gen);
    std::string text;
    at::Tensor row = out[0].cpu().contiguous();
    auto acc = row.accessor<int64_t, 1>();
    for (int64_t i = static_cast<int64_t>(ids.size()); i < acc.size(0); ++i) {
      text.push_back(static_cast<char>(acc[i]));
    }
    return text;
  }
};

namespace {

// Every rank's step time and memory peaks, gathered into rank 0's record (a collective: all
// ranks call it at the same steps).
void add_rank_figures(dist::Communicator& comm, json& record, double seconds,
                      const memory::MemorySnapshot& mem) {
  at::Tensor mine = at::tensor({seconds, static_cast<double>(mem.allocated_peak),
                                static_cast<double>(mem.host_rss_peak)},
                               at::TensorOptions(comm.device()).dtype(at::kDouble));
  at::Tensor all = at::empty({3 * comm.size()}, mine.options());
  comm.all_gather(all, mine);
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

// The message a step that ran out of memory stops the run with: what failed, the memory
// summary (fragmentation on CUDA), advice from the config, and the checkpoint that is kept.
std::string out_of_memory_report(const Config& cfg, const c10::Device& device, int64_t state_bytes,
                                 int world, int64_t step, const std::string& what,
                                 const fs::path& last_checkpoint, const torch::nn::Module& model) {
  const memory::MemorySnapshot mem = memory::snapshot(device);
  memory::OomFigures f;
  f.state_bytes = state_bytes;
  f.peak_bytes = mem.allocated_peak;
  f.allocated_bytes = mem.allocated;
  f.reserved_bytes = device.is_cuda() ? mem.reserved : 0;
  f.world_size = world;
  std::string first_line = what.substr(0, what.find('\n'));
  std::string report = fmt::format("out of memory in step {} on {}: {}\n", step, device.str(),
                                   first_line);
  report += memory::summary_table(mem);
  if (device.is_cuda()) {
    report += fmt::format("\n  fragmentation (reserved - allocated): {}",
                          memory::format_bytes(mem.reserved - mem.allocated));
  }
  report += fmt::format("\n  model state before the step: {}; the step reached {} before failing",
                        memory::format_bytes(state_bytes), memory::format_bytes(mem.allocated_peak));
  // The largest tensors whose owner is known: the model's parameters (and what each brings
  // along: its gradient, and Adam's two moments).
  std::vector<std::pair<int64_t, std::string>> largest;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    largest.emplace_back(static_cast<int64_t>(p.value().numel() * p.value().element_size()), p.key());
  }
  std::sort(largest.rbegin(), largest.rend());
  if (!largest.empty()) report += "\n  largest parameters (each also has a gradient and optimizer state):";
  for (size_t i = 0; i < std::min<size_t>(3, largest.size()); ++i) {
    report += fmt::format("\n    {} {}", largest[i].second, memory::format_bytes(largest[i].first));
  }
  report += "\nwhat would help:";
  for (const auto& line : memory::oom_advice(cfg, f)) report += "\n  - " + line;
  report += last_checkpoint.empty()
                ? std::string("\nno checkpoint was written before it")
                : fmt::format("\nthe last checkpoint is kept as it was: {}", last_checkpoint.string());
  return report;
}

}  // namespace

Trainer::Trainer(Config cfg) : impl_(std::make_unique<Impl>(std::move(cfg))) {}
Trainer::~Trainer() = default;

TrainResult Trainer::run() {
  Impl& s = *impl_;
  const Config& cfg = s.cfg;
  if (cfg.run.threads > 0) at::set_num_threads(static_cast<int>(cfg.run.threads));
  // Every CPU tensor byte is counted from here on (memory figures in metrics, budgets).
  memory::tune_host_allocator(cfg.memory.host_allocator);
  memory::install_cpu_tracking();
  memory::set_cpu_budget(cfg.memory.budget);

  // The job: one process, or one rank of many started by a launcher (docs/distributed.md).
  const dist::RankInfo rank_info = dist::rank_info_from_env();
  if (rank_info.distributed() || cfg.strategy.sharding.mode != "none") {
    s.comm = dist::init_from_env(cfg.distributed, rank_info);
    s.main = s.comm->is_main();
  }
  if (std::getenv("FRUGAL_LAUNCHER_TAGS_RANKS") == nullptr) {
    log::set_rank(rank_info.rank, rank_info.world_size);
  }
  struct RestoreLogLevel {
    bool active;
    ~RestoreLogLevel() {
      if (active) log::set_level(log::Level::info);
    }
  } restore_log_level{!s.main};
  if (!s.main) log::set_level(log::Level::warn);  // rank 0 tells the story; others warn and fail

  // Every rank decides (and fails) alike; rank 0 alone creates, and the others wait for it.
  s.plan = prepare_run_dir(cfg, /*create=*/s.main);
  if (s.comm) s.comm->barrier();
  if (s.main) log::add_file((s.plan.dir / "train.log").string());
  struct CloseLogFiles {
    ~CloseLogFiles() { log::close_files(); }
  } close_log_files;
  log::info(fmt::format("run directory: {}", s.plan.dir.string()));

  // Model, optimizer, schedule, engine. Seeding first makes initialisation reproducible.
  at::manual_seed(cfg.run.seed);
  s.device = resolve_device(cfg.run.device, rank_info.local_rank);
  s.model = make_model(cfg.model);
  s.model->to(s.device);
  auto optimizer = make_optimizer(cfg.optim, *s.model);
  auto schedule = std::make_shared<LrSchedule>(cfg.schedule, cfg.optim.lr, cfg.train.max_steps);
  s.engine =
      std::make_unique<Engine>(EngineOptions{cfg.strategy, cfg.optim.clip_grad_norm}, s.comm);
  s.engine->setup(s.model, optimizer, schedule);
  int64_t n_params = 0;
  for (const auto& p : s.model->parameters()) n_params += p.numel();
  log::info(fmt::format("model {}: {:.3f}M parameters on {}", cfg.model.type, n_params / 1e6,
                        s.device.str()));

  // Data.
  auto train_data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
  s.val_data = make_dataset(cfg.data, cfg.model, Split::val, cfg.run.seed);
  LoaderOptions lopts;
  lopts.batch_size = cfg.data.micro_batch_size * cfg.strategy.accumulation;
  lopts.shuffle = cfg.data.shuffle;
  lopts.seed = cfg.run.seed;
  lopts.num_workers = cfg.data.num_workers;
  lopts.pin_memory = cfg.data.pin_memory;
  // Each rank reads its own slice of every global batch (micro_batch_size x accumulation x
  // world_size samples).
  lopts.rank = s.comm ? s.comm->rank() : 0;
  lopts.world_size = s.comm ? s.comm->size() : 1;
  s.loader = std::make_unique<DataLoader>(train_data, lopts);
  if (s.loader->batches_per_epoch() < 1) {
    throw Error(fmt::format("data: the training split has {} samples, fewer than one batch of {}",
                            train_data->size(), lopts.batch_size));
  }

  TrainResult result;
  result.run_dir = s.plan.dir;
  result.is_main = s.main;
  if (s.plan.resume_from) {
    result.resumed_from = s.resume(*s.plan.resume_from);
    log::info(fmt::format("resumed from {} (step {})", s.plan.resume_from->string(),
                          result.resumed_from));
  }
  // Only now, with any resume verified, does anything in the run directory change.
  std::optional<MetricsLog> metrics;       // rank 0: the job's
  std::optional<MetricsLog> rank_metrics;  // train.metrics_per_rank: this rank's own
  if (s.main) {
    io::write_file_atomic(s.plan.dir / "config.resolved.yaml", to_yaml(cfg));
    metrics.emplace(s.plan.dir / "metrics.jsonl", result.resumed_from);
  }
  if (s.comm && cfg.train.metrics_per_rank) {
    rank_metrics.emplace(s.plan.dir / fmt::format("metrics.rank{}.jsonl", s.comm->rank()),
                         result.resumed_from);
  }

  const int64_t max_steps = cfg.train.max_steps;
  const c10::Device device = s.engine->device();
  // memory.record_history: the CUDA allocator's events, dumped for PyTorch's memory viewer and
  // `frugal report` when the run ends (or runs out of memory).
  const fs::path history_file =
      s.plan.dir / (s.main ? std::string("memory_snapshot.pickle")
                           : fmt::format("memory_snapshot.rank{}.pickle", s.comm->rank()));
  auto dump_history = [&] {
    if (cfg.memory.record_history && device.is_cuda()) {
      io::write_file_atomic(history_file, memory::history_snapshot(device));
    }
  };
  if (cfg.memory.record_history) {
    if (device.is_cuda()) {
      memory::start_history(device);
    } else {
      log::info("memory.record_history: the allocator history is CUDA's; nothing to record on " +
                device.str());
    }
  }
  int64_t run_peak = 0;
  memory::reset_peaks(device);
  Progress progress(s.main ? cfg.train.progress : "none", s.engine->steps_done(), max_steps,
                    cfg.train.log_every);
  s.model->train();
  int64_t last_record_step = s.engine->steps_done();
  if (s.comm) s.comm->reset_traffic();  // setup's broadcasts are not a step's traffic
  while (s.engine->steps_done() < max_steps) {
    Batch batch = s.loader->next().to(device, /*non_blocking=*/true);
    const int64_t state_bytes = memory::snapshot(device).allocated;
    StepStats st;
    try {
      st = s.engine->step(batch, s.loss_fn());
    } catch (const c10::OutOfMemoryError& e) {
      // A clean stop: the summary, what would help, and the checkpoints as they were.
      progress.finish();
      dump_history();
      throw Error(out_of_memory_report(cfg, device, state_bytes, s.comm ? s.comm->size() : 1,
                                       s.engine->steps_done() + 1, e.what_without_backtrace(),
                                       s.last_checkpoint, *s.model));
    }
    result.last_loss = st.loss;
    const double tok_s = st.seconds > 0 ? st.targets / st.seconds : 0.0;
    progress.update({st.step, max_steps, st.loss, st.lr, tok_s});
    if (!std::isfinite(st.loss)) {
      progress.message(fmt::format("step {}: loss is {}; stopping (the last checkpoint is kept)",
                                   st.step, st.loss));
      throw Error(fmt::format("training diverged at step {} (loss {})", st.step, st.loss));
    }
    const bool log_step =
        st.step % std::max<int64_t>(1, cfg.train.log_every) == 0 || st.step == max_steps;
    const bool monitor_step =
        cfg.memory.monitor_every > 0 && st.step % cfg.memory.monitor_every == 0;
    if (log_step || monitor_step) {
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
      }
      // Peaks cover the steps since the previous record.
      const memory::MemorySnapshot mem = memory::snapshot(device);
      record["mem_allocated_bytes"] = mem.allocated;
      record["mem_allocated_peak_bytes"] = mem.allocated_peak;
      if (device.is_cuda()) {
        record["mem_reserved_bytes"] = mem.reserved;
        record["mem_reserved_peak_bytes"] = mem.reserved_peak;
        record["mem_active_bytes"] = mem.active;
        record["mem_active_peak_bytes"] = mem.active_peak;
      }
      record["host_rss_bytes"] = mem.host_rss;
      record["host_rss_peak_bytes"] = mem.host_rss_peak;
      run_peak = std::max(run_peak, mem.allocated_peak);
      if (s.comm) {
        // What this rank's collectives moved per step since the previous record (the
        // training step's own: the record's gathering below is not counted).
        int64_t sent = 0, payload = 0;
        for (const auto& [op, t] : s.comm->traffic()) {
          sent += t.sent_bytes;
          payload += t.payload_bytes;
        }
        const int64_t steps = std::max<int64_t>(1, st.step - last_record_step);
        record["comm_sent_bytes_per_step"] = sent / steps;
        record["comm_payload_bytes_per_step"] = payload / steps;
      }
      if (rank_metrics) rank_metrics->write(record.dump());
      if (s.comm && s.comm->size() > 1) add_rank_figures(*s.comm, record, st.seconds, mem);
      if (s.comm) s.comm->reset_traffic();
      last_record_step = st.step;
      if (metrics) metrics->write(record.dump());
      memory::reset_peaks(device);
    }
    if (cfg.memory.empty_cache_every > 0 && st.step % cfg.memory.empty_cache_every == 0) {
      memory::empty_cache(device);
    }
    if (cfg.train.eval_every > 0 && st.step % cfg.train.eval_every == 0) {
      result.val_loss = s.evaluate();
      if (metrics) metrics->write(json{{"step", st.step}, {"val_loss", result.val_loss}}.dump());
      progress.message(fmt::format("step {}: val loss {:.4f}", st.step, result.val_loss));
    }
    if (cfg.train.checkpoint_every > 0 && st.step % cfg.train.checkpoint_every == 0) {
      s.save(st.step);
      if (s.main) progress.message(fmt::format("checkpoint: {}", s.last_checkpoint.string()));
    }
  }
  progress.finish();
  dump_history();
  {
    memory::MemorySnapshot mem = memory::snapshot(device);
    mem.allocated_peak = std::max(mem.allocated_peak, run_peak);
    log::info(memory::summary_table(mem));
  }
  result.steps = s.engine->steps_done();
  if (s.last_checkpoint_step != result.steps) {
    s.save(result.steps);
    log::info(fmt::format("checkpoint: {}", s.last_checkpoint.string()));
  }
  result.last_checkpoint = s.last_checkpoint;
  if (std::isnan(result.val_loss) && cfg.train.eval_batches > 0) {
    result.val_loss = s.evaluate();
  }
  if (!std::isnan(result.val_loss)) {
    log::info(fmt::format("final val loss {:.4f}", result.val_loss));
  }
  if (cfg.generate.tokens > 0) {
    FullParameters full(s.engine->sharding());  // a collective: every rank takes part
    if (s.main) result.sample = s.sample_text();
  }
  return result;
}

}  // namespace frugal
