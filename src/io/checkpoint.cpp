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

// Inside the temporary directory a plain write is enough: the directory is published whole.
void write_plain(const fs::path& path, std::string_view bytes) { io::write_file_synced(path, bytes); }

// The manifest of a checkpoint directory, read and parsed; the checks every reader makes.
struct Manifest {
  fs::path dir;
  fs::path path;
  nlohmann::json json;

  bool lists_any() const { return json.contains("files") && json["files"].is_object(); }
  bool lists(const std::string& name) const { return lists_any() && json["files"].contains(name); }
  bool sharded() const { return json.contains("sharded"); }
  // Bounded by the files listed, one per rank at least, before anything loops over the
  // ranks: a damaged world_size (2^31) would otherwise make two billion file names.
  int shard_world() const {
    const int64_t world = json["sharded"].value("world_size", int64_t{0});
    const size_t listed = lists_any() ? json["files"].size() : 0;
    if (world < 1 || static_cast<uint64_t>(world) > listed) {
      throw Error(fmt::format("{}: sharded with world_size {} ({} files listed)", path.string(),
                              world, listed));
    }
    return static_cast<int>(world);
  }

  // A listed file's bytes, checked against the manifest's size and hash.
  std::string read_checked(const std::string& name) const {
    const fs::path p = dir / name;
    if (!lists(name)) {
      throw Error(fmt::format("{}: manifest does not list '{}'", path.string(), name));
    }
    std::string bytes = read_file(p);
    const auto& entry = json["files"][name];
    if (bytes.size() != entry.value("bytes", size_t{0})) {
      throw Error(fmt::format("{}: truncated or altered ({} bytes, manifest says {})",
                              p.string(), bytes.size(), entry.value("bytes", size_t{0})));
    }
    if (fnv1a64_hex(bytes) != entry.value("fnv1a64", std::string())) {
      throw Error(fmt::format("{}: corrupt (content hash does not match the manifest)", p.string()));
    }
    return bytes;
  }

  // What a complete checkpoint of this kind holds: optimizer.pt unless sharded (then only
  // when listed), every rank's shard when sharded.
  std::vector<std::string> required_files() const {
    std::vector<std::string> names{"model.pt", "state.pt", "meta.json"};
    if (!sharded() || lists("optimizer.pt")) names.push_back("optimizer.pt");
    if (sharded()) {
      const int world = shard_world();
      for (int r = 0; r < world; ++r) names.push_back(shard_file_name(r, world));
    }
    return names;
  }
};

Manifest read_manifest(const fs::path& cdir) {
  Manifest m{cdir, cdir / kManifest, {}};
  if (!fs::is_directory(cdir)) {
    throw Error(fmt::format("checkpoint '{}': no such checkpoint directory", cdir.string()));
  }
  if (!fs::exists(m.path)) {
    throw Error(fmt::format("checkpoint '{}': incomplete (no {})", cdir.string(), kManifest));
  }
  const std::string text = read_file(m.path);
  auto corrupt = [&](const std::string& why) {
    return Error(fmt::format("{}: corrupt manifest ({})", m.path.string(), why));
  };
  try {
    m.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(e.what());
  }
  // The manifest carries no hash of its own: its shape is checked here, so that what reads it
  // later meets only the types it expects.
  if (!m.json.is_object()) throw corrupt("not a JSON object");
  if (m.json.contains("step") && !m.json["step"].is_number_integer()) throw corrupt("step");
  if (m.json.contains("sharded")) {
    const auto& sharded = m.json["sharded"];
    if (!sharded.is_object() || !sharded.value("world_size", nlohmann::json()).is_number_integer()) {
      throw corrupt("sharded.world_size");
    }
  }
  if (m.json.contains("files")) {
    if (!m.json["files"].is_object()) throw corrupt("files");
    for (const auto& [name, entry] : m.json["files"].items()) {
      if (!entry.is_object() || !entry.value("bytes", nlohmann::json()).is_number_unsigned() ||
          !entry.value("fnv1a64", nlohmann::json()).is_string()) {
        throw corrupt(fmt::format("the entry of '{}'", name));
      }
    }
  }
  return m;
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
  io::create_directories(dir);
  (void)final_dir_for(dir, ckpt.step);
  const fs::path tmp = dir / fmt::format(".{}.tmp-{}", step_name(ckpt.step), ::getpid());
  if (fs::exists(tmp)) io::remove_tree(tmp);
  io::create_directories(tmp);
  auto files = common_files(ckpt);
  files.emplace_back("optimizer.pt", save_tensors(ckpt.optimizer));
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

void verify_checkpoint(const fs::path& cdir) {
  const Manifest m = read_manifest(cdir);
  std::vector<std::string> names = m.required_files();
  // Files the manifest lists beyond those: checked too, so nothing it vouches for is wrong.
  if (m.json.contains("files")) {
    for (const auto& [name, _] : m.json["files"].items()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (const auto& name : names) (void)m.read_checked(name);
}

std::optional<fs::path> newest_valid_checkpoint(const fs::path& dir,
                                                RejectedCheckpoints* rejected) {
  auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      verify_checkpoint(*it);
      return *it;
    } catch (const Error& e) {
      if (rejected != nullptr) rejected->emplace_back(*it, e.what());
    }
  }
  return std::nullopt;
}

Checkpoint load_checkpoint(const fs::path& cdir, std::optional<int> only_shard) {
  const Manifest m = read_manifest(cdir);
  Checkpoint ckpt;
  ckpt.step = m.json.value("step", int64_t{0});
  ckpt.model = load_tensors(m.read_checked("model.pt"), (cdir / "model.pt").string());
  ckpt.state = load_tensors(m.read_checked("state.pt"), (cdir / "state.pt").string());
  ckpt.meta_json = m.read_checked("meta.json");
  if (!m.sharded() || m.lists("optimizer.pt")) {
    ckpt.optimizer = load_tensors(m.read_checked("optimizer.pt"), (cdir / "optimizer.pt").string());
  }
  if (!m.sharded()) return ckpt;
  ckpt.shard_world = m.shard_world();
  for (int r = 0; r < ckpt.shard_world; ++r) {
    if (only_shard && *only_shard != r) continue;
    const std::string name = shard_file_name(r, ckpt.shard_world);
    ckpt.shards.push_back(load_tensors(m.read_checked(name), (cdir / name).string()));
  }
  return ckpt;  // no shard when only_shard is not one of the writers' ranks
}

}  // namespace frugal
