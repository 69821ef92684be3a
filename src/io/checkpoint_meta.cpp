#include "frugal/io/checkpoint_meta.h"

#include <fmt/format.h>

#include "frugal/util/error.h"

namespace frugal::io {

nlohmann::json checkpoint_meta(const Checkpoint& ckpt, const std::filesystem::path& dir) {
  try {
    return nlohmann::json::parse(ckpt.meta_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt ({})", (dir / "meta.json").string(), e.what()));
  }
}

}  // namespace frugal::io
