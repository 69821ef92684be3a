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

fs::path save_checkpoint(const fs::path& dir, const Checkpoint& ckpt, int64_t keep_last) {
  fs::create_directories(dir);
  const fs::path final_dir = dir / step_name(ckpt.step);
  if (fs::exists(final_dir)) {
    throw Error(fmt::format("checkpoint '{}' already exists; refusing to overwrite it",
                            final_dir.string()));
  }
  const fs::path tmp = dir / fmt::format(".{}.tmp-{}", step_name(ckpt.step), ::getpid());
  if (fs::exists(tmp)) io::remove_tree(tmp);
  fs::create_directories(tmp);
  try {
    const std::vector<std::pair<std::string, std::string>> files = {
        {"model.pt", save_tensors(ckpt.model)},
        {"optimizer.pt", ckpt.optimizer},
        {"state.pt", save_tensors(ckpt.state)},
        {"meta.json", ckpt.meta_json.empty() ? std::string("{}") : ckpt.meta_json},
    };
    nlohmann::json manifest;
    manifest["format"] = "frugal-checkpoint-1";
    manifest["step"] = ckpt.step;
    for (const auto& [name, bytes] : files) {
      write_plain(tmp / name, bytes);
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
  return final_dir;
}

Checkpoint load_checkpoint(const fs::path& cdir) {
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
  ckpt.optimizer = read_checked("optimizer.pt");
  ckpt.state = load_tensors(read_checked("state.pt"), (cdir / "state.pt").string());
  ckpt.meta_json = read_checked("meta.json");
  return ckpt;
}

}  // namespace frugal
