#include "frugal/distributed/sharded_state.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "frugal/util/error.h"

namespace frugal::dist {

std::string layout_to_json(const ShardLayout& layout) {
  nlohmann::json j = {{"mode", layout.mode}, {"world_size", layout.world_size}};
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
    return layout;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: bad sharding layout ({})", what, e.what()));
  }
}

std::string shard_key(const std::string& flat, const std::string& kind) { return flat + "/" + kind; }

std::map<std::string, at::Tensor> unshard(const ShardLayout& layout,
                                          const std::vector<io::NamedTensors>& shards,
                                          const std::string& kind) {
  if (static_cast<int>(shards.size()) != layout.world_size) {
    throw Error(fmt::format("sharded checkpoint: {} shards for a world of {}", shards.size(),
                            layout.world_size));
  }
  std::vector<std::map<std::string, at::Tensor>> by_rank;
  for (const auto& shard : shards) by_rank.emplace_back(shard.begin(), shard.end());
  std::map<std::string, at::Tensor> out;
  for (const FlatLayout& f : layout.flats) {
    const std::string key = shard_key(f.name, kind);
    if (by_rank.front().count(key) == 0) continue;
    std::vector<at::Tensor> parts;
    for (int r = 0; r < layout.world_size; ++r) {
      auto it = by_rank[r].find(key);
      if (it == by_rank[r].end()) {
        throw Error(fmt::format("sharded checkpoint: rank {}'s shard lacks '{}'", r, key));
      }
      parts.push_back(it->second);
    }
    if (kind == "step") {
      for (const auto& name : f.names) out[name] = parts.front();
      continue;
    }
    const int64_t expected = f.shard_numel(layout.world_size);
    for (int r = 0; r < layout.world_size; ++r) {
      if (parts[r].numel() != expected) {
        throw Error(fmt::format("sharded checkpoint: rank {}'s '{}' has {} elements, the layout "
                                "says {}", r, key, parts[r].numel(), expected));
      }
    }
    const at::Tensor whole = at::cat(parts).narrow(0, 0, f.numel);
    for (size_t i = 0; i < f.names.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : f.shapes[i]) n *= d;
      out[f.names[i]] = whole.narrow(0, f.offsets[i], n).view(f.shapes[i]);
    }
  }
  return out;
}

}  // namespace frugal::dist
