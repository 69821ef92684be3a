#include "frugal/train/checkpoint_manager.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "frugal/config/load.h"
#include "frugal/data/loader.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/engine/state.h"
#include "frugal/hf/folder.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/checkpoint_meta.h"
#include "frugal/memory/stats.h"
#include "frugal/models/finetune.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {

CheckpointManager::CheckpointManager(const Config& cfg, fs::path dir, Engine& engine,
                                     std::shared_ptr<dist::Communicator> comm)
    : cfg_(cfg), dir_(std::move(dir)), engine_(engine), comm_(std::move(comm)) {
  if (finetuning(cfg_.model) && !cfg_.model.init_from.empty()) {
    base_ = hf::folder_fingerprint(cfg_.model.init_from);
  }
}

int64_t CheckpointManager::global_batch() const {
  return micro_batch_items(cfg_.data) * cfg_.strategy.accumulation * (comm_ ? comm_->size() : 1);
}

void CheckpointManager::barrier() const {
  if (comm_) comm_->barrier();
}

bool CheckpointManager::parameters_finite() const {
  bool bad = false;
  for (const auto& group : engine_.optimizer().param_groups()) {
    for (const auto& p : group.params()) {
      // The tensors the optimizer steps (this rank's shards, offload's host masters) are the
      // ones a checkpoint writes.
      if (!at::isfinite(engine_.optimizer_param(p)).all().item<bool>()) bad = true;
    }
  }
  return !engine_.sharding().any_across_ranks(bad);
}

struct CheckpointManager::Snapshot {
  int64_t step = 0;
  int writers = 0;  // ranks that write a shard (0: the checkpoint is whole)
  NamedTensors shard;
  Checkpoint ckpt;  // rank 0's: the whole tensors and the meta
  fs::path published;
};

struct CheckpointManager::Pending {
  std::unique_ptr<Snapshot> snapshot;
  std::thread writer;
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::promise<void> written;  // what the update's next step waits for (hold_state_until)
  int64_t copied_bytes = 0, in_place_bytes = 0;
};

CheckpointManager::~CheckpointManager() {
  // A run that ends by an error still lets the thread end (its checkpoint stays unpublished
  // in the staging folder, as a kill would leave it).
  if (pending_ && pending_->writer.joinable()) pending_->writer.join();
}

std::unique_ptr<CheckpointManager::Snapshot> CheckpointManager::snapshot(int64_t step,
                                                                         const LoaderPosition& data) {
  const bool main = !comm_ || comm_->is_main();
  // A checkpoint of non-finite parameters would be resumed from and lose the run: refused,
  // and the ones written before stay.
  if (!parameters_finite()) {
    throw Error(fmt::format(
        "checkpoint at step {} not written: the parameters are not finite (the newest valid "
        "checkpoint is {}); lower optim.lr or set optim.clip_grad_norm and resume from it",
        step, last_.empty() ? std::string("none") : last_.string()));
  }
  StateDict state = engine_.state_dict();
  auto s = std::make_unique<Snapshot>();
  s->step = step;
  // Ranks that hold shards save their own random generators with them (each draws its own);
  // otherwise rank 0's stand for the job.
  s->writers = state.layout_json.empty() ? 0 : (comm_ ? comm_->size() : 1);
  for (auto& t : rng_state()) (s->writers > 0 ? state.shard : state.state).push_back(std::move(t));
  s->shard = std::move(state.shard);
  if (main) {
    s->ckpt.step = step;
    s->ckpt.model = std::move(state.model);
    s->ckpt.optimizer = std::move(state.optimizer);
    s->ckpt.state = std::move(state.state);
    json meta = {{"step", step},
                 {"data", {{"epoch", data.epoch}, {"batch", data.batch}}},
                 {"global_batch", global_batch()},
                 {"fingerprint", config_fingerprint(cfg_)},
                 {"config", to_yaml(cfg_)}};
    if (s->writers > 0) meta["sharding"] = json::parse(state.layout_json);
    if (!base_.empty()) meta["base"] = base_;
    s->ckpt.meta_json = meta.dump(2);
  }
  return s;
}

void CheckpointManager::write(Snapshot& s) const {
  if (s.writers > 0) {
    write_checkpoint_shard(dir_, s.step, comm_ ? comm_->rank() : 0, s.writers, s.shard);
  }
  // A single process needs no other rank's shard before publishing.
  if (!comm_) s.published = publish_sharded_checkpoint(dir_, s.ckpt, s.writers, cfg_.train.keep_last);
}

void CheckpointManager::publish(Snapshot& s) {
  const bool main = !comm_ || comm_->is_main();
  if (comm_) {
    barrier();
    if (main) s.published = publish_sharded_checkpoint(dir_, s.ckpt, s.writers, cfg_.train.keep_last);
    barrier();
  }
  last_ = main ? s.published : checkpoint_path(dir_, s.step);
  last_step_ = s.step;
}

void CheckpointManager::save(int64_t step, const LoaderPosition& data) {
  finish_pending();  // at most one save in flight, published in order
  std::unique_ptr<Snapshot> s = snapshot(step, data);
  // Rank 0 prepares the directory, every rank with a shard writes it, rank 0 publishes.
  if (!comm_ || comm_->is_main()) begin_sharded_checkpoint(dir_, step);
  barrier();
  if (!cfg_.train.checkpoint_async) {
    write(*s);
    publish(*s);
    return;
  }
  // Asynchronous: what the save holds is copied to host memory now (the live tensors change
  // with the next step), then written by a thread while training goes on. State the update
  // keeps on disk, unchanged until its next step, is written from there with no copy: that
  // step waits for the write instead.
  OptimizerUpdate& update = *engine_.update();
  pending_ = std::make_unique<Pending>();
  Pending* p = pending_.get();
  std::map<std::string, at::Tensor> staged;
  int part_index = 0;
  for (NamedTensors* part : {&s->shard, &s->ckpt.model, &s->ckpt.optimizer, &s->ckpt.state}) {
    ++part_index;
    for (auto& [name, t] : *part) {
      if (update.kept_until_step(t)) {
        p->in_place_bytes += static_cast<int64_t>(t.nbytes());
        continue;
      }
      const std::string key = fmt::format("{}/{}", part_index, name);
      at::Tensor buffer = staging_[key];
      if (!buffer.defined() || buffer.sizes() != t.sizes() || buffer.scalar_type() != t.scalar_type()) {
        buffer = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).pinned_memory(t.is_cuda()));
      }
      buffer.copy_(t.detach());
      t = buffer;
      staged.emplace(key, std::move(buffer));
      p->copied_bytes += static_cast<int64_t>(t.nbytes());
    }
  }
  staging_ = std::move(staged);  // what this save did not use is freed
  p->snapshot = std::move(s);
  if (p->in_place_bytes > 0) update.hold_state_until(p->written.get_future().share());
  p->writer = std::thread([this, p] {
    // A low CPU priority (nice 10): on a machine whose cores the step already uses, the write
    // (serialising, hashing) takes what the step leaves rather than slowing it.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
    try {
      write(*p->snapshot);
    } catch (...) {
      p->error = std::current_exception();
    }
    p->written.set_value();
    p->done.store(true);
  });
}

void CheckpointManager::poll() {
  if (!pending_) return;
  // Published once every rank's write is done: the ranks agree on the step.
  const bool waiting = !pending_->done.load();
  if (!engine_.sharding().any_across_ranks(waiting)) finish_pending();
}

void CheckpointManager::finish_pending() {
  if (!pending_) return;
  std::unique_ptr<Pending> p = std::move(pending_);
  p->writer.join();
  if (p->error) std::rethrow_exception(p->error);
  publish(*p->snapshot);
  if (!comm_ || comm_->is_main()) {
    const std::string in_place =
        p->in_place_bytes == 0
            ? std::string()
            : fmt::format("; {} of optimizer state read in place from the offload file, {} copied",
                          memory::format_bytes(p->in_place_bytes),
                          memory::format_bytes(p->copied_bytes));
    log::info(fmt::format("checkpoint: {} (written in the background{})", last_.string(), in_place));
  }
}

namespace {

// What differs, by name, from the config the checkpoint recorded; the two hashes where that
// config cannot be read (a checkpoint of an older frugal, a model folder since moved).
std::string fingerprint_mismatch(const json& meta, const std::string& theirs,
                                 const std::string& ours, const Config& cfg) {
  try {
    const Config saved = load_config_string(meta.value("config", std::string()), "meta.json");
    const std::vector<std::string> diffs = fingerprint_differences(saved, cfg);
    if (!diffs.empty()) {
      std::string text;
      for (size_t i = 0; i < diffs.size() && i < 3; ++i) text += (i ? "; " : "") + diffs[i];
      if (diffs.size() > 3) text += fmt::format("; and {} more", diffs.size() - 3);
      return text;
    }
  } catch (const std::exception&) {
  }
  return fmt::format("fingerprint {} vs {}", theirs, ours);
}

}  // namespace

CheckpointManager::Resumed CheckpointManager::resume(const fs::path& from) {
  dist::CheckpointReader saved(from, comm_ ? comm_->rank() : 0);
  const json meta = io::checkpoint_meta(saved.checkpoint(), from);
  const std::string theirs = meta.value("fingerprint", std::string());
  const std::string ours = config_fingerprint(cfg_);
  if (theirs != ours) {
    throw Error(fmt::format(
        "run.resume: checkpoint '{}' was written with different model/data/optim/schedule/"
        "strategy settings ({}); restore them or start a new run.name",
        from.string(), fingerprint_mismatch(meta, theirs, ours, cfg_)));
  }
  // The frozen base is not in the checkpoint: it must be the folder the adapters trained on.
  if (meta.contains("base") && meta["base"].is_object()) {
    for (const auto& [file, then] : meta["base"].items()) {
      const auto now = base_.find(file);
      const std::string then_text = then.is_string() ? then.get<std::string>() : then.dump();
      if (now == base_.end() || now->second != then_text) {
        throw Error(fmt::format(
            "run.resume: checkpoint '{}' trained adapters on the base in model.init_from '{}', "
            "whose {} has changed since ({} then, {} now); restore that folder or start a new "
            "run.name",
            from.string(), cfg_.model.init_from, file, then_text,
            now == base_.end() ? std::string("missing") : now->second));
      }
    }
  }
  const int64_t saved_batch = meta.value("global_batch", global_batch());
  if (saved_batch != global_batch()) {
    throw Error(fmt::format(
        "run.resume: checkpoint '{}' trained on global batches of {} samples, this run's are "
        "{} (data.micro_batch_size {} x strategy.accumulation {} x {} ranks); keep the product",
        from.string(), saved_batch, global_batch(), cfg_.data.micro_batch_size,
        cfg_.strategy.accumulation, comm_ ? comm_->size() : 1));
  }
  if (engine_.load_state_dict(saved)) {
    load_rng_state(saved.rng_state());
  } else {
    const std::string written =
        meta.contains("sharding")
            ? fmt::format("{} over {} ranks{}", meta["sharding"].value("mode", std::string("zero")),
                          meta["sharding"].value("world_size", 0),
                          meta["sharding"].value("replicas", 1) > 1
                              ? fmt::format(" x {} replicas", meta["sharding"].value("replicas", 1))
                              : std::string())
            : std::string("whole (none or ddp)");
    log::info(fmt::format("resumed a checkpoint written {} under {} at {} ranks: parameters and "
                          "optimizer state redistributed by name; random generators restart from "
                          "run.seed",
                          written, engine_.sharding().name(), comm_ ? comm_->size() : 1));
  }
  const int64_t step = saved.checkpoint().step;
  engine_.set_steps_done(step);
  Resumed out;
  out.step = step;
  out.data.epoch = meta["data"].value("epoch", int64_t{0});
  out.data.batch = meta["data"].value("batch", int64_t{0});
  last_ = from;
  last_step_ = step;
  return out;
}

}  // namespace frugal
