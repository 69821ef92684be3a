#include "frugal/distributed/sharded_state.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "frugal/util/error.h"

namespace frugal::dist {

std::string layout_to_json(const ShardLayout& layout) {
  nlohmann::json j = {{"mode", layout.mode}, {"world_size", layout.world_size}};
  // Only where there are replicas: layouts without them read and write as before.
  if (layout.replicas > 1) j["replicas"] = layout.replicas;
  j["flats"] = nlohmann::json::array();
  for (const FlatLayout& f : layout.flats) {
    j["flats"].push_back({{"name", f.name}, {"numel", f.numel}, {"names", f.names},
                          {"shapes", f.shapes}, {"offsets", f.offsets}});
  }
  return j.dump();
}

ShardLayout layout_from_json(const std::string& text, const std::string& what) {
  try {
    const auto j = nlohmann::json::parse(text);
    ShardLayout layout;
    layout.mode = j.at("mode").get<std::string>();
    layout.world_size = j.at("world_size").get<int>();
    layout.replicas = j.value("replicas", 1);
    for (const auto& f : j.at("flats")) {
      FlatLayout flat;
      flat.name = f.at("name").get<std::string>();
      flat.numel = f.at("numel").get<int64_t>();
      flat.names = f.at("names").get<std::vector<std::string>>();
      flat.shapes = f.at("shapes").get<std::vector<std::vector<int64_t>>>();
      flat.offsets = f.at("offsets").get<std::vector<int64_t>>();
      if (flat.names.size() != flat.shapes.size() || flat.names.size() != flat.offsets.size()) {
        throw Error(fmt::format("{}: flat buffer '{}' lists {} names, {} shapes, {} offsets", what,
                                flat.name, flat.names.size(), flat.shapes.size(),
                                flat.offsets.size()));
      }
      layout.flats.push_back(std::move(flat));
    }
    if (layout.world_size < 1) throw Error(what + ": world_size must be >= 1");
    if (layout.replicas < 1) throw Error(what + ": replicas must be >= 1");
    return layout;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: bad sharding layout ({})", what, e.what()));
  }
}

std::string shard_key(const std::string& flat, const std::string& kind) { return flat + "/" + kind; }

}  // namespace frugal::dist
