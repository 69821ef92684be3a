#include "checkpoint_manifest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

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

void Manifest::verify(const std::string& name) const {
  const nlohmann::json& e = entry(name);
  const fs::path p = dir / name;
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
  std::string buffer(size_t{1} << 20, '\0');
  std::uint64_t hash = kFnv1a64Offset;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("cannot read '{}': {}", p.string(), std::strerror(errno)));
    }
    if (n == 0) break;
    hash = fnv1a64(std::string_view(buffer.data(), static_cast<size_t>(n)), hash);
  }
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
