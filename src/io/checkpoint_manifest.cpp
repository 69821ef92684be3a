#include "checkpoint_manifest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "fd.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/hash.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::io::detail {
namespace {
constexpr const char* kManifest = "manifest.json";
}  // namespace


int Manifest::shard_world() const {
  const int64_t world = json["sharded"].value("world_size", int64_t{0});
  const size_t listed = lists_any() ? json["files"].size() : 0;
  if (world < 1 || static_cast<uint64_t>(world) > listed) {
    throw Error(fmt::format("{}: sharded with world_size {} ({} files listed)", path.string(),
                            world, listed));
  }
  return static_cast<int>(world);
}

const nlohmann::json& Manifest::entry(const std::string& name) const {
  if (!lists(name)) {
    throw Error(fmt::format("{}: manifest does not list '{}'", path.string(), name));
  }
  return json["files"][name];
}

std::string Manifest::read_checked(const std::string& name) const {
  const nlohmann::json& e = entry(name);
  const fs::path p = dir / name;
  std::string bytes = read_file(p);
  if (bytes.size() != e.value("bytes", size_t{0})) {
    throw Error(fmt::format("{}: truncated or altered ({} bytes, manifest says {})", p.string(),
                            bytes.size(), e.value("bytes", size_t{0})));
  }
  if (fnv1a64_hex(bytes) != e.value("fnv1a64", std::string())) {
    throw Error(fmt::format("{}: corrupt (content hash does not match the manifest)", p.string()));
  }
  return bytes;
}

namespace {
// A listed file opened, its size checked against the manifest's entry `e`.
Fd open_sized(const fs::path& p, const nlohmann::json& e) {
  Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    throw Error(fmt::format("cannot read '{}': {}", p.string(), std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("cannot read '{}': {}", p.string(), std::strerror(EISDIR)));
  const size_t expected = e.value("bytes", size_t{0});
  if (static_cast<size_t>(st.st_size) != expected) {
    throw Error(fmt::format("{}: truncated or altered ({} bytes, manifest says {})", p.string(),
                            static_cast<size_t>(st.st_size), expected));
  }
  return fd;
}

// The FNV-1a hash of bytes [start, end) of an open file, read through `buffer` in pieces.
std::uint64_t hash_range(const Fd& fd, const fs::path& p, int64_t start, int64_t end,
                         std::string& buffer) {
  std::uint64_t hash = kFnv1a64Offset;
  for (int64_t at = start; at < end;) {
    const auto want = std::min<int64_t>(end - at, static_cast<int64_t>(buffer.size()));
    const ssize_t n = ::pread(fd.get(), buffer.data(), static_cast<size_t>(want), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("cannot read '{}': {}", p.string(), std::strerror(errno)));
    if (n == 0) throw Error(fmt::format("{}: truncated (ends before byte {})", p.string(), at));
    hash = fnv1a64(std::string_view(buffer.data(), static_cast<size_t>(n)), hash);
    at += n;
  }
  return hash;
}
}  // namespace

std::optional<TensorFileSummary> Manifest::block_index(const std::string& name,
                                                       int64_t* index_bytes) const {
  const nlohmann::json& e = entry(name);
  if (e.contains("index")) {  // a shard: its index is a file of its own
    const nlohmann::json& named = e["index"];
    if (!named.is_string()) throw Error(fmt::format("{}: corrupt manifest (the index of '{}')", path.string(), name));
    const std::string index = named.get<std::string>();
    TensorFileSummary summary;
    try {
      const std::string text = read_checked(index);
      if (index_bytes != nullptr) *index_bytes += static_cast<int64_t>(text.size());
      summary = summary_from_json(nlohmann::json::parse(text), (dir / index).string());
    } catch (const nlohmann::json::exception& ex) {
      throw Error(fmt::format("{}: {}", (dir / index).string(), ex.what()));
    }
    if (summary.bytes != e.value("bytes", int64_t{-1}) ||
        summary.fnv1a64 != e.value("fnv1a64", std::string())) {
      throw Error(fmt::format("{}: does not describe '{}' as the manifest does",
                              (dir / index).string(), name));
    }
    return summary;
  }
  if (e.contains("blocks") && e.contains("tensors")) return summary_from_json(e, path.string());
  return std::nullopt;
}

int64_t Manifest::verify_blocks(const std::string& name, const TensorFileSummary& index,
                                int64_t first, int64_t last) const {
  const fs::path p = dir / name;
  Fd fd = open_sized(p, entry(name));
  std::string buffer(static_cast<size_t>(std::min<int64_t>(int64_t{1} << 20, index.block_bytes)), '\0');
  int64_t read = 0;
  for (int64_t b = first; b < last; ++b) {
    const int64_t start = b * index.block_bytes;
    const int64_t end = std::min(index.bytes, start + index.block_bytes);
    if (hex64(hash_range(fd, p, start, end, buffer)) != index.blocks[static_cast<size_t>(b)]) {
      throw Error(fmt::format("{}: corrupt (the hash of bytes {}..{} does not match the manifest)",
                              p.string(), start, end));
    }
    read += end - start;
  }
  return read;
}

void Manifest::check_size(const std::string& name) const { open_sized(dir / name, entry(name)); }

void Manifest::verify(const std::string& name) const {
  const fs::path p = dir / name;
  const nlohmann::json& e = entry(name);
  Fd fd = open_sized(p, e);
  std::string buffer(size_t{1} << 20, '\0');
  const std::uint64_t hash = hash_range(fd, p, 0, e.value("bytes", int64_t{0}), buffer);
  if (hex64(hash) != e.value("fnv1a64", std::string())) {
    throw Error(fmt::format("{}: corrupt (content hash does not match the manifest)", p.string()));
  }
}

std::vector<std::string> Manifest::required_files() const {
  std::vector<std::string> names{"model.pt", "state.pt", "meta.json"};
  if (!sharded() || lists("optimizer.pt")) names.push_back("optimizer.pt");
  if (sharded()) {
    const int world = shard_world();
    for (int r = 0; r < world; ++r) names.push_back(shard_file_name(r, world));
  }
  return names;
}

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

}  // namespace frugal::io::detail
