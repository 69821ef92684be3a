#include "frugal/io/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "frugal/io/atomic_file.h"
#include "frugal/io/hash.h"
#include "frugal/io/remove_tree.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace fs = std::filesystem;

namespace frugal {
using io::fnv1a64_hex;
using io::load_tensors;
using io::publish_directory_atomic;
using io::read_file;
using io::save_tensors;
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

void write_plain(const fs::path& path, std::string_view bytes) {
  // Inside the temporary directory a plain write is enough: the directory is published whole.
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool flushed = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok || !flushed) {
    throw Error(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  }
}

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

// Writes the files and a manifest of them (plus `listed`, already in `tmp`) and publishes
// `tmp` as the step's checkpoint; then prunes to keep_last. Removes `tmp` on failure.
fs::path publish(const fs::path& dir, const fs::path& tmp, const Checkpoint& ckpt,
                 const std::vector<std::pair<std::string, std::string>>& files,
                 const std::vector<std::string>& listed, int64_t keep_last) {
  try {
    const fs::path final_dir = final_dir_for(dir, ckpt.step);
    nlohmann::json manifest;
    manifest["format"] = "frugal-checkpoint-1";
    manifest["step"] = ckpt.step;
    if (ckpt.shard_world > 0) manifest["sharded"] = {{"world_size", ckpt.shard_world}};
    for (const auto& [name, bytes] : files) {
      write_plain(tmp / name, bytes);
      manifest["files"][name] = {{"bytes", bytes.size()}, {"fnv1a64", fnv1a64_hex(bytes)}};
    }
    for (const auto& name : listed) {
      const std::string bytes = read_file(tmp / name);
      manifest["files"][name] = {{"bytes", bytes.size()}, {"fnv1a64", fnv1a64_hex(bytes)}};
    }
    write_plain(tmp / kManifest, manifest.dump(2));
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

std::vector<std::pair<std::string, std::string>> common_files(const Checkpoint& ckpt) {
  return {{"model.pt", save_tensors(ckpt.model)},
          {"state.pt", save_tensors(ckpt.state)},
          {"meta.json", ckpt.meta_json.empty() ? std::string("{}") : ckpt.meta_json}};
}

}  // namespace

fs::path checkpoint_path(const fs::path& dir, int64_t step) { return dir / step_name(step); }

std::string shard_file_name(int rank, int world) {
  return fmt::format("shard-{:05d}-of-{:05d}.pt", rank, world);
}

fs::path save_checkpoint(const fs::path& dir, const Checkpoint& ckpt, int64_t keep_last) {
  fs::create_directories(dir);
  (void)final_dir_for(dir, ckpt.step);
  const fs::path tmp = dir / fmt::format(".{}.tmp-{}", step_name(ckpt.step), ::getpid());
  if (fs::exists(tmp)) io::remove_tree(tmp);
  fs::create_directories(tmp);
  auto files = common_files(ckpt);
  files.emplace_back("optimizer.pt", save_tensors(ckpt.optimizer));
  return publish(dir, tmp, ckpt, files, {}, keep_last);
}

void begin_sharded_checkpoint(const fs::path& dir, int64_t step) {
  fs::create_directories(dir);
  (void)final_dir_for(dir, step);
  const fs::path tmp = sharded_staging(dir, step);
  if (fs::exists(tmp)) io::remove_tree(tmp);  // left by a crashed attempt
  fs::create_directories(tmp);
}

void write_checkpoint_shard(const fs::path& dir, int64_t step, int rank, int world,
                            const NamedTensors& shard) {
  write_plain(sharded_staging(dir, step) / shard_file_name(rank, world), save_tensors(shard));
}

fs::path publish_sharded_checkpoint(const fs::path& dir, const Checkpoint& ckpt, int world,
                                    int64_t keep_last) {
  Checkpoint sharded = ckpt;
  sharded.shard_world = world;
  std::vector<std::string> shards;
  for (int r = 0; r < world; ++r) shards.push_back(shard_file_name(r, world));
  auto files = common_files(sharded);
  // Optimizer state of parameters kept whole (all of it without shards; the rest is in them).
  if (world == 0 || !ckpt.optimizer.empty()) files.emplace_back("optimizer.pt", save_tensors(ckpt.optimizer));
  return publish(dir, sharded_staging(dir, ckpt.step), sharded, files, shards, keep_last);
}

Checkpoint load_checkpoint(const fs::path& cdir, std::optional<int> only_shard) {
  const fs::path manifest_path = cdir / kManifest;
  if (!fs::is_directory(cdir)) {
    throw Error(fmt::format("checkpoint '{}': no such checkpoint directory", cdir.string()));
  }
  if (!fs::exists(manifest_path)) {
    throw Error(fmt::format("checkpoint '{}': incomplete (no {})", cdir.string(), kManifest));
  }
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(manifest_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt manifest ({})", manifest_path.string(), e.what()));
  }
  auto read_checked = [&](const std::string& name) {
    const fs::path p = cdir / name;
    if (!manifest.contains("files") || !manifest["files"].contains(name)) {
      throw Error(fmt::format("{}: manifest does not list '{}'", manifest_path.string(), name));
    }
    std::string bytes = read_file(p);
    const auto& entry = manifest["files"][name];
    if (bytes.size() != entry.value("bytes", size_t{0})) {
      throw Error(fmt::format("{}: truncated or altered ({} bytes, manifest says {})",
                              p.string(), bytes.size(), entry.value("bytes", size_t{0})));
    }
    if (fnv1a64_hex(bytes) != entry.value("fnv1a64", std::string())) {
      throw Error(fmt::format("{}: corrupt (content hash does not match the manifest)", p.string()));
    }
    return bytes;
  };
  Checkpoint ckpt;
  ckpt.step = manifest.value("step", int64_t{0});
  ckpt.model = load_tensors(read_checked("model.pt"), (cdir / "model.pt").string());
  ckpt.state = load_tensors(read_checked("state.pt"), (cdir / "state.pt").string());
  ckpt.meta_json = read_checked("meta.json");
  const bool sharded = manifest.contains("sharded");
  if (!sharded || manifest["files"].contains("optimizer.pt")) {
    ckpt.optimizer = load_tensors(read_checked("optimizer.pt"), (cdir / "optimizer.pt").string());
  }
  if (!sharded) return ckpt;
  ckpt.shard_world = manifest["sharded"].value("world_size", 0);
  if (ckpt.shard_world < 1) {
    throw Error(fmt::format("{}: sharded with world_size {}", manifest_path.string(),
                            ckpt.shard_world));
  }
  for (int r = 0; r < ckpt.shard_world; ++r) {
    if (only_shard && *only_shard != r) continue;
    const std::string name = shard_file_name(r, ckpt.shard_world);
    ckpt.shards.push_back(load_tensors(read_checked(name), (cdir / name).string()));
  }
  return ckpt;  // no shard when only_shard is not one of the writers' ranks
}

}  // namespace frugal
