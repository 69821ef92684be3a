// frugal_dist_worker checkpoint_io save|save_whole|load DIR: the host memory and file reads of
// a zero3 checkpoint, per rank, measured with the tracking CPU allocator and the reader's count
// of bytes read. A GPT of 4 blocks (5 units: the blocks and the root) with AdamW:
//   save        trains 2 steps under zero3 and writes a sharded checkpoint under DIR (as the
//               trainer does: state_dict, each rank its shard, rank 0 publishes); the tracked
//               memory the save allocates above what was live before it must stay within one
//               unit's full state (its parameters and both moments, unsharded), where holding
//               the rank's whole state again (the old way: a host clone of every shard) is
//               several units' worth.
//   save_whole  the same under ddp: a whole checkpoint (model.pt, optimizer.pt), rank 0's.
//   load        builds the same model under zero3 at this world size and resumes DIR's newest
//               checkpoint. The tracked memory above the state kept after the load must stay
//               within one unit's full state, and the bytes read must be those of the blocks
//               that hold what this rank keeps (computed here from the indexes and the
//               layout): under another layout about 1/world of the files, never all of them.
//               Of shards exactly those blocks; of a whole checkpoint's files, where one block
//               may hold the ends of several tensors read at different times, at least those
//               blocks and at most each as often as ranges it holds are read.
// Rank 0 prints a JSON report of every rank's figures; every rank checks its own.
#include <ATen/ATen.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/distributed/checkpoint_verify.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/checkpoint.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "scenarios.h"
#include "support/model_configs.h"

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

Job build(const std::string& sharding = "zero3") {
  DistributedConfig dc;
  dc.backend = "gloo";
  dc.timeout_s = 60;
  Job job;
  job.comm = dist::init_from_env(dc);
  const ModelConfig mc = test::transformer_config("gpt", 4, 4, 128, 32, 512);
  OptimConfig oc;
  oc.lr = 1e-3;
  StrategyConfig sc;
  sc.sharding.mode = sharding;
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

void train_two_steps(Job& job) {
  at::manual_seed(21);
  for (int s = 0; s < 2; ++s) {
    at::Tensor x = at::randint(512, {2, 33}, at::kLong);
    Batch b{x.narrow(1, 0, 32).contiguous(), x.narrow(1, 1, 32).contiguous()};
    job.engine->step(b, [&](const Batch& mb) { return job.model->loss_sum(job.model->forward(mb.x), mb.y); });
  }
}

// What rank 0 writes of a state saved at step 2 (the trainer also writes config, data position).
Checkpoint step_two(const StateDict& state) {
  Checkpoint ckpt;
  ckpt.step = 2;
  ckpt.model = state.model;
  ckpt.optimizer = state.optimizer;
  ckpt.state = state.state;
  json meta = {{"step", 2}};
  if (!state.layout_json.empty()) meta["sharding"] = json::parse(state.layout_json);
  ckpt.meta_json = meta.dump();
  return ckpt;
}

// A ddp job's whole checkpoint, written by rank 0 as the trainer writes one.
int save_whole(const fs::path& dir) {
  Job job = build("ddp");
  train_two_steps(job);
  StateDict state = job.engine->state_dict();
  if (job.comm->is_main()) save_checkpoint(dir / "checkpoints", step_two(state), 0);
  job.comm->barrier();
  return 0;
}

int save(const fs::path& dir) {
  memory::install_cpu_tracking();
  Job job = build();
  train_two_steps(job);
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
  if (job.comm->is_main()) publish_sharded_checkpoint(ckpts, step_two(state), world, 0);
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

int64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"I64", 8}, {"F32", 4}, {"I32", 4}, {"BF16", 2}, {"F16", 2}, {"I16", 2},
      {"U8", 1},  {"I8", 1},  {"BOOL", 1}};
  return sizes.at(dtype);
}

// Of a whole checkpoint's model.pt and optimizer.pt, resumed under `now` by `rank`: the bytes
// of the blocks that hold what it keeps (each parameter's elements in its cut of every flat
// buffer, of every kind; each step count; the tensors kept out of the flat buffers whole), and
// those bytes counted once for every range read that touches them (a block holding the ends of
// several tensors is read again when each is; the reader keeps only the last block). Also the
// two files' total bytes.
struct WholeReads {
  int64_t least = 0, most = 0, total = 0;
};
WholeReads needed_whole_bytes(const fs::path& ckpt, const dist::ShardLayout& now, int rank) {
  const json files = json::parse(io::read_file(ckpt / "manifest.json"))["files"];
  std::map<std::pair<std::string, int64_t>, int64_t> touches;  // (file, block) -> ranges
  auto take = [&](const std::string& file, const std::string& key, int64_t first, int64_t count) {
    const json& entry = files[file]["tensors"][key];
    const int64_t item = dtype_bytes(entry["dtype"].get<std::string>());
    const int64_t b = files[file]["block_bytes"].get<int64_t>();
    const int64_t at = entry["offset"].get<int64_t>() + first * item;
    for (int64_t k = at / b; count > 0 && k <= (at + count * item - 1) / b; ++k) ++touches[{file, k}];
  };
  std::set<std::string> sharded;
  for (const auto& f : now.flats) {
    sharded.insert(f.names.begin(), f.names.end());
    const int64_t mine = f.shard_numel(now.world_size);
    for (const auto& [key, _] : files["optimizer.pt"]["tensors"].items()) {
      if (key == f.names.front() + "/step") take("optimizer.pt", key, 0, 1);
    }
    for (size_t i = 0; i < f.names.size(); ++i) {
      int64_t numel = 1;
      for (int64_t d : f.shapes[i]) numel *= d;
      const int64_t lo = std::max(f.offsets[i], rank * mine);
      const int64_t hi = std::min(f.offsets[i] + numel, (rank + 1) * mine);
      if (lo >= hi) continue;
      take("model.pt", f.names[i], lo - f.offsets[i], hi - lo);
      for (const auto& [key, _] : files["optimizer.pt"]["tensors"].items()) {
        if (key.rfind(f.names[i] + "/", 0) == 0 && key != f.names[i] + "/step") {
          take("optimizer.pt", key, lo - f.offsets[i], hi - lo);
        }
      }
    }
  }
  for (const auto& [key, entry] : files["model.pt"]["tensors"].items()) {
    if (sharded.count(key) > 0) continue;
    int64_t numel = 1;
    for (const auto& d : entry["shape"]) numel *= d.get<int64_t>();
    take("model.pt", key, 0, numel);
  }
  WholeReads out;
  for (const auto& [where, n] : touches) {
    const int64_t b = files[where.first]["block_bytes"].get<int64_t>();
    const int64_t size = std::min(b, files[where.first]["bytes"].get<int64_t>() - where.second * b);
    out.least += size;
    out.most += size * n;
  }
  out.total = files["model.pt"]["bytes"].get<int64_t>() + files["optimizer.pt"]["bytes"].get<int64_t>();
  return out;
}

int load(const fs::path& dir) {
  memory::install_cpu_tracking();
  Job job = build();
  const auto ckpt = latest_checkpoint(dir / "checkpoints");
  require(ckpt.has_value(), "a checkpoint to load");
  // Verified first, as the trainer does: the ranks share the reading.
  const int64_t verified = dist::verify_checkpoint_together(*job.comm, *ckpt);
  int64_t all_files = 0;
  const json listed = json::parse(io::read_file(*ckpt / "manifest.json"))["files"];
  for (const auto& [_, e] : listed.items()) all_files += e["bytes"].get<int64_t>();
  const int64_t live = memory::cpu_counters().current_bytes;
  memory::reset_cpu_peak();
  dist::CheckpointReader reader(*ckpt, job.comm->rank());
  const int64_t info_bytes = reader.bytes_read();  // manifest, meta, state.pt
  const bool same_layout = job.engine->load_state_dict(reader);
  const int64_t after = memory::cpu_counters().current_bytes;
  const int64_t extra = memory::cpu_counters().peak_bytes - std::max(after, live);
  const int64_t read = reader.bytes_read() - info_bytes;
  const json meta = json::parse(io::read_file(*ckpt / "meta.json"));
  const bool whole = !meta.contains("sharding");
  // This run's layout (the live shards: no copy), and the one that wrote the checkpoint.
  const dist::ShardLayout now =
      dist::layout_from_json(job.engine->state_dict().layout_json, "this run's layout");
  const dist::ShardLayout old = whole ? now : dist::layout_from_json(meta["sharding"].dump(), "meta.json");
  const int64_t bound = largest_unit_state_bytes(old);
  json report = {{"rank", job.comm->rank()},         {"same_layout", same_layout},
                 {"load_extra_bytes", extra},         {"unit_state_bytes", bound},
                 {"bytes_read", read},                {"info_bytes_read", info_bytes},
                 {"kept_state_bytes", after - live},  {"whole", whole},
                 {"verify_bytes_read", verified},     {"all_files_bytes", all_files}};
  // Each rank verifies about 1/world of the bytes (the index files are read by every rank
  // whose blocks they describe), never all of them as one process verifying alone does.
  require(verified < all_files / job.comm->size() + all_files / 20,
          "verifying together reads about 1/world of the checkpoint: " + report.dump());
  if (whole) {
    const WholeReads needed = needed_whole_bytes(*ckpt, now, job.comm->rank());
    report["bytes_needed"] = needed.least;
    report["bytes_needed_most"] = needed.most;
    report["bytes_total"] = needed.total;
    require(!same_layout && needed.least <= read && read <= needed.most,
            "resuming a whole checkpoint reads the blocks that hold this rank's slices: " +
                report.dump());
  } else if (!same_layout) {
    const auto [needed, total] =
        needed_shard_bytes(*ckpt, old, job.comm->rank(), job.comm->size());
    report["bytes_needed"] = needed;
    report["bytes_total"] = total;
    require(read == needed, "resharding reads exactly the blocks that hold this rank's "
                            "slices: " + report.dump());
  } else {
    const json files = json::parse(io::read_file(*ckpt / "manifest.json"))["files"];
    const std::string name = shard_file_name(job.comm->rank(), job.comm->size());
    // Its own shard and index, and rank 0's index (the optimizer's kinds, the steps).
    const int64_t own = files[name]["bytes"].get<int64_t>() +
                        files[name + ".index.json"]["bytes"].get<int64_t>() +
                        (job.comm->rank() == 0 ? 0 : files[shard_file_name(0, job.comm->size()) + ".index.json"]["bytes"].get<int64_t>());
    report["own_shard_bytes"] = own;
    require(read <= own, "the same layout reads no more than the rank's own shard: " +
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
  if (what == "save_whole") return save_whole(dir);
  if (what == "load") return load(dir);
  throw std::runtime_error("checkpoint_io: save, save_whole or load DIR, not '" + what + "'");
}

}  // namespace frugal::test_worker
