// frugal_dist_worker checkpoint_io save DIR | load DIR: the host memory and file reads of a
// zero3 checkpoint, per rank, measured with the tracking CPU allocator and the reader's count
// of bytes read. A GPT of 4 blocks (5 units: the blocks and the root) with AdamW:
//   save  trains 2 steps and writes a sharded checkpoint under DIR (as the trainer does:
//         state_dict, each rank its shard, rank 0 publishes); the tracked memory the save
//         allocates above what was live before it must stay within one unit's full state
//         (its parameters and both moments, unsharded), where holding the rank's whole state
//         again (the old way: a host clone of every shard) is several units' worth.
//   load  builds the same model at this world size and resumes DIR's newest checkpoint. The
//         tracked memory above the state kept after the load must stay within one unit's
//         full state, and the bytes read from the shard files must be exactly those of the
//         blocks that hold what this rank keeps (computed here from the manifest's index and
//         the layout): under another world size about 1/world of the shards, never all of them.
// Rank 0 prints a JSON report of every rank's figures; every rank checks its own.
#include <ATen/ATen.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/checkpoint.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "scenarios.h"

namespace frugal::test_worker {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

struct Job {
  std::shared_ptr<dist::Communicator> comm;
  std::shared_ptr<Model> model;
  std::unique_ptr<Engine> engine;
};

Job build() {
  DistributedConfig dc;
  dc.backend = "gloo";
  dc.timeout_s = 60;
  Job job;
  job.comm = dist::init_from_env(dc);
  ModelConfig mc;
  mc.type = "gpt";
  mc.n_layer = 4;
  mc.n_head = 4;
  mc.n_embd = 128;
  mc.block_size = 32;
  mc.vocab_size = 512;
  OptimConfig oc;
  oc.lr = 1e-3;
  StrategyConfig sc;
  sc.sharding.mode = "zero3";
  at::manual_seed(11);
  job.model = make_model(mc);
  job.engine = std::make_unique<Engine>(EngineOptions{sc, 1.0}, job.comm);
  job.engine->setup(job.model, make_optimizer(oc, *job.model));
  return job;
}

// The largest unit's full state in bytes: its parameters and AdamW's two moments, fp32.
int64_t largest_unit_state_bytes(const dist::ShardLayout& layout) {
  int64_t most = 0;
  for (const auto& f : layout.flats) most = std::max(most, f.numel);
  return most * 3 * 4;
}

// Every rank's figures, gathered to rank 0 as JSON lines through the store-free path: each
// rank writes its own file and rank 0 reads them after a barrier.
json gather_reports(Job& job, const fs::path& dir, const json& mine) {
  io::write_file_atomic(dir / ("report-" + std::to_string(job.comm->rank()) + ".json"), mine.dump());
  job.comm->barrier();
  json all = json::array();
  if (job.comm->is_main()) {
    for (int r = 0; r < job.comm->size(); ++r) {
      all.push_back(json::parse(io::read_file(dir / ("report-" + std::to_string(r) + ".json"))));
    }
  }
  job.comm->barrier();
  return all;
}

int save(const fs::path& dir) {
  memory::install_cpu_tracking();
  Job job = build();
  at::manual_seed(21);
  for (int s = 0; s < 2; ++s) {
    at::Tensor x = at::randint(512, {2, 33}, at::kLong);
    Batch b{x.narrow(1, 0, 32).contiguous(), x.narrow(1, 1, 32).contiguous()};
    job.engine->step(b, [&](const Batch& mb) { return job.model->loss_sum(job.model->forward(mb.x), mb.y); });
  }
  const fs::path ckpts = dir / "checkpoints";
  const int64_t live = memory::cpu_counters().current_bytes;
  memory::reset_cpu_peak();
  StateDict state = job.engine->state_dict();
  const int world = job.comm->size();
  if (job.comm->is_main()) begin_sharded_checkpoint(ckpts, 2);
  job.comm->barrier();
  write_checkpoint_shard(ckpts, 2, job.comm->rank(), world, state.shard);
  job.comm->barrier();
  int64_t kept = 0;
  for (const auto& [_, t] : state.shard) kept += static_cast<int64_t>(t.nbytes());
  if (job.comm->is_main()) {
    Checkpoint ckpt;
    ckpt.step = 2;
    ckpt.model = state.model;
    ckpt.optimizer = state.optimizer;
    ckpt.state = state.state;
    ckpt.meta_json = json{{"step", 2}, {"sharding", json::parse(state.layout_json)}}.dump();
    publish_sharded_checkpoint(ckpts, ckpt, world, 0);
  }
  job.comm->barrier();
  const int64_t extra = memory::cpu_counters().peak_bytes - live;
  const int64_t bound = largest_unit_state_bytes(dist::layout_from_json(state.layout_json, "layout"));
  const json report = {{"rank", job.comm->rank()}, {"save_extra_bytes", extra},
                       {"unit_state_bytes", bound}, {"rank_state_bytes", kept}};
  require(extra <= bound, "saving holds at most one unit's full state: " + report.dump());
  const json all = gather_reports(job, dir, report);
  if (job.comm->is_main()) std::cout << json{{"world", world}, {"ranks", all}}.dump() << std::endl;
  return 0;
}

// The bytes of the blocks of the shard files that hold the elements this rank keeps of every
// flat buffer and kind, from the manifest's index: what a reader that reads only those must
// read, their index files included (and the total bytes of the shard files).
std::pair<int64_t, int64_t> needed_shard_bytes(const fs::path& ckpt, const dist::ShardLayout& old,
                                               int rank, int world) {
  const json manifest = json::parse(io::read_file(ckpt / "manifest.json"));
  std::map<std::string, json> indexes;  // each shard's index: block_bytes, tensors
  auto index = [&](const std::string& file) -> const json& {
    if (indexes.count(file) == 0) {
      indexes[file] = json::parse(io::read_file(ckpt / (file + ".index.json")));
    }
    return indexes[file];
  };
  std::set<std::pair<std::string, int64_t>> blocks;  // (file, block)
  int64_t total = 0;
  for (int q = 0; q < old.world_size; ++q) {
    total += manifest["files"][shard_file_name(q, old.world_size)]["bytes"].get<int64_t>();
  }
  auto take = [&](const std::string& file, const json& entry, int64_t first_byte, int64_t bytes) {
    const int64_t b = index(file)["block_bytes"].get<int64_t>();
    if (bytes <= 0) return;
    const int64_t at = entry["offset"].get<int64_t>() + first_byte;
    for (int64_t k = at / b; k <= (at + bytes - 1) / b; ++k) blocks.insert({file, k});
  };
  const std::string file0 = shard_file_name(0, old.world_size);
  for (const auto& f : old.flats) {
    const int64_t mine = f.shard_numel(world), theirs = f.shard_numel(old.world_size);
    for (const auto& [key, entry] : index(file0)["tensors"].items()) {
      if (key.rfind(f.name + "/", 0) != 0) continue;
      const std::string kind = key.substr(f.name.size() + 1);
      if (kind == "step") {  // one scalar per buffer, read from rank 0's shard
        take(file0, entry, 0, 8);
        continue;
      }
      // The parameters' elements in this rank's cut of the buffer (padding is never read).
      for (size_t i = 0; i < f.names.size(); ++i) {
        int64_t numel = 1;
        for (int64_t d : f.shapes[i]) numel *= d;
        const int64_t lo = std::max(f.offsets[i], rank * mine);
        const int64_t hi = std::min(f.offsets[i] + numel, (rank + 1) * mine);
        for (int64_t q = lo / theirs; lo < hi && q * theirs < hi; ++q) {
          const int64_t a = std::max(lo, q * theirs), z = std::min(hi, (q + 1) * theirs);
          const std::string file = shard_file_name(static_cast<int>(q), old.world_size);
          take(file, index(file)["tensors"][key], (a - q * theirs) * 4, (z - a) * 4);
        }
      }
    }
  }
  // Each shard file read is found through its index, rank 0's always (it holds the steps).
  std::set<std::string> files = {file0};
  for (const auto& [file, _] : blocks) files.insert(file);
  int64_t bytes = 0;
  for (const auto& file : files) bytes += manifest["files"][file + ".index.json"]["bytes"].get<int64_t>();
  for (const auto& [file, k] : blocks) {
    const int64_t b = index(file)["block_bytes"].get<int64_t>();
    const int64_t size = manifest["files"][file]["bytes"].get<int64_t>();
    bytes += std::min(b, size - k * b);
  }
  return {bytes, total};
}

int load(const fs::path& dir) {
  memory::install_cpu_tracking();
  Job job = build();
  const auto ckpt = latest_checkpoint(dir / "checkpoints");
  require(ckpt.has_value(), "a checkpoint to load");
  const int64_t live = memory::cpu_counters().current_bytes;
  memory::reset_cpu_peak();
  dist::CheckpointReader reader(*ckpt, job.comm->rank());
  const int64_t whole_bytes = reader.bytes_read();  // manifest, meta, model.pt, state.pt
  const bool same_layout = job.engine->load_state_dict(reader);
  const int64_t after = memory::cpu_counters().current_bytes;
  const int64_t extra = memory::cpu_counters().peak_bytes - std::max(after, live);
  const int64_t shard_bytes = reader.bytes_read() - whole_bytes;
  const dist::ShardLayout old = dist::layout_from_json(
      json::parse(io::read_file(*ckpt / "meta.json"))["sharding"].dump(), "meta.json");
  const int64_t bound = largest_unit_state_bytes(old);
  json report = {{"rank", job.comm->rank()},         {"same_layout", same_layout},
                 {"load_extra_bytes", extra},         {"unit_state_bytes", bound},
                 {"shard_bytes_read", shard_bytes},   {"whole_bytes_read", whole_bytes},
                 {"kept_state_bytes", after - live}};
  if (!same_layout) {
    const auto [needed, total] =
        needed_shard_bytes(*ckpt, old, job.comm->rank(), job.comm->size());
    report["shard_bytes_needed"] = needed;
    report["shard_bytes_total"] = total;
    require(shard_bytes == needed, "resharding reads exactly the blocks that hold this rank's "
                                   "slices: " + report.dump());
  } else {
    const json files = json::parse(io::read_file(*ckpt / "manifest.json"))["files"];
    const std::string name = shard_file_name(job.comm->rank(), job.comm->size());
    // Its own shard and index, and rank 0's index (the optimizer's kinds, the steps).
    const int64_t own = files[name]["bytes"].get<int64_t>() +
                        files[name + ".index.json"]["bytes"].get<int64_t>() +
                        (job.comm->rank() == 0 ? 0 : files[shard_file_name(0, job.comm->size()) + ".index.json"]["bytes"].get<int64_t>());
    report["own_shard_bytes"] = own;
    require(shard_bytes <= own, "the same layout reads no more than the rank's own shard: " +
                                    report.dump());
  }
  require(extra <= bound, "resuming holds at most one unit's full state: " + report.dump());
  const json all = gather_reports(job, dir, report);
  if (job.comm->is_main()) {
    std::cout << json{{"world", job.comm->size()}, {"ranks", all}}.dump() << std::endl;
  }
  return 0;
}

}  // namespace

int checkpoint_io(const std::string& what, const std::string& dir) {
  if (what == "save") return save(dir);
  if (what == "load") return load(dir);
  throw std::runtime_error("checkpoint_io: save DIR or load DIR, not '" + what + "'");
}

}  // namespace frugal::test_worker
