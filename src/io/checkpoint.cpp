#include "frugal/io/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint_manifest.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/hash.h"
#include "frugal/io/remove_tree.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "tensor_file.h"

namespace fs = std::filesystem;

namespace frugal {
using io::fnv1a64_hex;
using io::load_tensors;
using io::publish_directory_atomic;
using io::read_file;
using io::detail::Manifest;
using io::detail::read_manifest;
namespace {

constexpr const char* kManifest = "manifest.json";

std::string step_name(int64_t step) { return fmt::format("step_{:08d}", step); }

// Parses "step_00000120" -> 120; nullopt for anything else (temporary folders included).
std::optional<int64_t> step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.size() != 13 || name.rfind("step_", 0) != 0) return std::nullopt;
  if (!std::all_of(name.begin() + 5, name.end(), ::isdigit)) return std::nullopt;
  return std::stoll(name.substr(5));
}

// Inside the temporary directory a plain write is enough: the directory is published whole.
void write_plain(const fs::path& path, std::string_view bytes) { io::write_file_synced(path, bytes); }

}  // namespace

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    auto step = step_of(entry.path());
    if (step && fs::exists(entry.path() / kManifest)) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [_, p] : found) out.push_back(p);
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

namespace {

fs::path final_dir_for(const fs::path& dir, int64_t step) {
  const fs::path final_dir = dir / step_name(step);
  if (fs::exists(final_dir)) {
    throw Error(fmt::format("checkpoint '{}' already exists; refusing to overwrite it",
                            final_dir.string()));
  }
  return final_dir;
}

fs::path sharded_staging(const fs::path& dir, int64_t step) {
  // Every rank must find it without talking to the others: no pid in the name.
  return dir / fmt::format(".{}.tmp-sharded", step_name(step));
}

// What a checkpoint's tensor files hold, by file name.
using TensorFiles = std::vector<std::pair<std::string, const NamedTensors*>>;

// A shard's index (tensor_file.h's summary: where each tensor lies, the block hashes), written
// by the shard's writer beside it and listed in the manifest like any file. Kept out of the
// manifest itself, which every rank reads: a rank reads the index of the shards it reads.
std::string shard_index_name(const std::string& shard) { return shard + ".index.json"; }

// Writes the tensor files and meta.json, and a manifest of them and of `shards` (already in
// `tmp`, each with its index beside it), and publishes `tmp` as the step's
// checkpoint; then prunes to keep_last. Removes `tmp` on failure.
fs::path publish(const fs::path& dir, const fs::path& tmp, const Checkpoint& ckpt,
                 const TensorFiles& tensor_files, const std::vector<std::string>& shards,
                 int64_t keep_last) {
  try {
    const fs::path final_dir = final_dir_for(dir, ckpt.step);
    nlohmann::json manifest;
    manifest["format"] = "frugal-checkpoint-1";
    manifest["step"] = ckpt.step;
    if (ckpt.shard_world > 0) manifest["sharded"] = {{"world_size", ckpt.shard_world}};
    for (const auto& [name, tensors] : tensor_files) {
      manifest["files"][name] = io::detail::summary_to_json(io::detail::write_tensor_file(tmp / name, *tensors));
    }
    const std::string meta = ckpt.meta_json.empty() ? std::string("{}") : ckpt.meta_json;
    write_plain(tmp / "meta.json", meta);
    manifest["files"]["meta.json"] = {{"bytes", meta.size()}, {"fnv1a64", fnv1a64_hex(meta)}};
    // Each shard's writer hashed it as it wrote it, into its index: rank 0 reads none of them.
    for (const auto& name : shards) {
      const std::string index_name = shard_index_name(name);
      const std::string index = read_file(tmp / index_name);
      nlohmann::json entry;
      try {
        const nlohmann::json summary = nlohmann::json::parse(index);
        entry = {{"bytes", summary.at("bytes")}, {"fnv1a64", summary.at("fnv1a64")}, {"index", index_name}};
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("{}: {}", (tmp / index_name).string(), e.what()));
      }
      std::error_code ec;
      const auto size = fs::file_size(tmp / name, ec);
      if (ec || static_cast<int64_t>(size) != entry.value("bytes", int64_t{-1})) {
        throw Error(fmt::format("checkpoint shard '{}' is missing or not the size its writer "
                                "reported", (tmp / name).string()));
      }
      manifest["files"][name] = std::move(entry);
      manifest["files"][index_name] = {{"bytes", index.size()}, {"fnv1a64", fnv1a64_hex(index)}};
    }
    write_plain(tmp / kManifest, manifest.dump(1));
    publish_directory_atomic(tmp, final_dir);
  } catch (...) {
    try {
      io::remove_tree(tmp);
    } catch (...) {
    }
    throw;
  }
  if (keep_last > 0) {
    auto all = list_checkpoints(dir);
    for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
      io::remove_tree(all[i]);
    }
  }
  return dir / step_name(ckpt.step);
}

}  // namespace

fs::path checkpoint_path(const fs::path& dir, int64_t step) { return dir / step_name(step); }

std::string shard_file_name(int rank, int world) {
  return fmt::format("shard-{:05d}-of-{:05d}.pt", rank, world);
}

fs::path save_checkpoint(const fs::path& dir, const Checkpoint& ckpt, int64_t keep_last) {
  io::create_directories(dir);
  (void)final_dir_for(dir, ckpt.step);
  const fs::path tmp = dir / fmt::format(".{}.tmp-{}", step_name(ckpt.step), ::getpid());
  if (fs::exists(tmp)) io::remove_tree(tmp);
  io::create_directories(tmp);
  const TensorFiles files = {
      {"model.pt", &ckpt.model}, {"state.pt", &ckpt.state}, {"optimizer.pt", &ckpt.optimizer}};
  return publish(dir, tmp, ckpt, files, {}, keep_last);
}

void begin_sharded_checkpoint(const fs::path& dir, int64_t step) {
  io::create_directories(dir);
  (void)final_dir_for(dir, step);
  // What crashed attempts left, of any step: on a full disk it holds the space this one needs.
  // Only this job's writers use these names (no pid in them), and none is writing now.
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".step_", 0) == 0 && name.size() > 12 &&
        name.compare(name.size() - 12, 12, ".tmp-sharded") == 0) {
      stale.push_back(entry.path());
    }
  }
  for (const auto& p : stale) io::remove_tree(p);
  const fs::path tmp = sharded_staging(dir, step);
  io::create_directories(tmp);
}

void write_checkpoint_shard(const fs::path& dir, int64_t step, int rank, int world,
                            const NamedTensors& shard) {
  const fs::path staging = sharded_staging(dir, step);
  const std::string name = shard_file_name(rank, world);
  const auto summary = io::detail::write_tensor_file(staging / name, shard);
  write_plain(staging / shard_index_name(name), io::detail::summary_to_json(summary).dump());
}

fs::path publish_sharded_checkpoint(const fs::path& dir, const Checkpoint& ckpt, int world,
                                    int64_t keep_last) {
  Checkpoint sharded = ckpt;
  sharded.shard_world = world;
  std::vector<std::string> shards;
  for (int r = 0; r < world; ++r) shards.push_back(shard_file_name(r, world));
  TensorFiles files = {{"model.pt", &ckpt.model}, {"state.pt", &ckpt.state}};
  // Optimizer state of parameters kept whole (all of it without shards; the rest is in them).
  if (world == 0 || !ckpt.optimizer.empty()) files.emplace_back("optimizer.pt", &ckpt.optimizer);
  return publish(dir, sharded_staging(dir, ckpt.step), sharded, files, shards, keep_last);
}

namespace {
// What verify_checkpoint checks: the files a checkpoint of its kind needs, and every other file
// the manifest lists, so nothing it vouches for is wrong.
std::vector<std::string> files_to_verify(const Manifest& m) {
  std::vector<std::string> names = m.required_files();
  if (m.json.contains("files")) {
    for (const auto& [name, _] : m.json["files"].items()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}
}  // namespace

void verify_checkpoint(const fs::path& cdir) {
  const Manifest m = read_manifest(cdir);
  for (const auto& name : files_to_verify(m)) m.verify(name);
}

int64_t verify_checkpoint_part(const fs::path& cdir, int part, int parts) {
  if (parts < 1 || part < 0 || part >= parts) {
    throw std::invalid_argument("verify_checkpoint_part: part must lie in [0, parts)");
  }
  const Manifest m = read_manifest(cdir);
  const std::vector<std::string> names = files_to_verify(m);
  // Sharded by as many ranks as there are parts: part r checks shard r and its index whole,
  // the shard rank r resumes from under the same layout (its reads then find the bytes in the
  // page cache), and only the sizes of the others.
  std::map<std::string, int> owner;
  if (m.sharded() && m.shard_world() == parts) {
    for (int r = 0; r < parts; ++r) {
      owner[shard_file_name(r, parts)] = r;
      owner[shard_index_name(shard_file_name(r, parts))] = r;
    }
  }
  int64_t read = 0;
  // All of one file: by its blocks when it has an index, else whole.
  auto verify_all = [&](const std::string& name) {
    if (auto index = m.block_index(name, &read)) {
      read += m.verify_blocks(name, *index, 0, static_cast<int64_t>(index->blocks.size()));
    } else {
      m.verify(name);
      read += m.entry(name).value("bytes", int64_t{0});
    }
  };
  for (size_t k = 0; k < names.size(); ++k) {
    const auto own = owner.find(names[k]);
    if (own != owner.end()) {
      if (own->second == part) {
        verify_all(names[k]);
      } else {
        m.check_size(names[k]);
      }
    } else if (auto index = m.block_index(names[k], &read)) {
      const auto blocks = static_cast<int64_t>(index->blocks.size());
      read += m.verify_blocks(names[k], *index, blocks * part / parts, blocks * (part + 1) / parts);
    } else if (static_cast<int>(k % static_cast<size_t>(parts)) == part) {
      verify_all(names[k]);
    } else {
      m.check_size(names[k]);  // present and whole; its hash is another part's to check
    }
  }
  return read;
}

std::optional<fs::path> newest_valid_checkpoint(const fs::path& dir,
                                                RejectedCheckpoints* rejected,
                                                const CheckpointVerifier& verify) {
  auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      if (verify) {
        verify(*it);
      } else {
        verify_checkpoint(*it);
      }
      return *it;
    } catch (const Error& e) {
      if (rejected != nullptr) rejected->emplace_back(*it, e.what());
    }
  }
  return std::nullopt;
}

namespace {
// Step, state.pt, meta.json and the shards' world of a checkpoint whose manifest is `m`.
Checkpoint load_info(const fs::path& cdir, const Manifest& m) {
  Checkpoint ckpt;
  ckpt.step = m.json.value("step", int64_t{0});
  ckpt.state = load_tensors(m.read_checked("state.pt"), (cdir / "state.pt").string());
  ckpt.meta_json = m.read_checked("meta.json");
  if (m.sharded()) ckpt.shard_world = m.shard_world();
  return ckpt;
}
}  // namespace

Checkpoint load_checkpoint_info(const fs::path& cdir) { return load_info(cdir, read_manifest(cdir)); }

Checkpoint load_checkpoint(const fs::path& cdir, std::optional<int> only_shard) {
  const Manifest m = read_manifest(cdir);
  Checkpoint ckpt = load_info(cdir, m);
  ckpt.model = load_tensors(m.read_checked("model.pt"), (cdir / "model.pt").string());
  if (!m.sharded() || m.lists("optimizer.pt")) {
    ckpt.optimizer = load_tensors(m.read_checked("optimizer.pt"), (cdir / "optimizer.pt").string());
  }
  if (!m.sharded()) return ckpt;
  for (int r = 0; r < ckpt.shard_world; ++r) {
    if (only_shard && *only_shard != r) continue;
    const std::string name = shard_file_name(r, ckpt.shard_world);
    ckpt.shards.push_back(load_tensors(m.read_checked(name), (cdir / name).string()));
  }
  return ckpt;  // no shard when only_shard is not one of the writers' ranks
}

}  // namespace frugal
