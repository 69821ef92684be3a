#include "frugal/distributed/checkpoint_reader.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "frugal/io/checkpoint_meta.h"
#include "frugal/util/error.h"

namespace frugal::dist {

namespace {
// "<name>/<kind>" -> (name, kind); parameter names hold dots, never slashes.
std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return {key, std::string()};
  return {key.substr(0, slash), key.substr(slash + 1)};
}
}  // namespace

CheckpointReader::CheckpointReader(std::filesystem::path dir, int rank)
    : dir_(std::move(dir)), rank_(rank) {
  ckpt_ = load_checkpoint(dir_, rank_);
  if (ckpt_.shard_world == 0) return;
  const std::string what = (dir_ / "meta.json").string();
  const nlohmann::json meta = io::checkpoint_meta(ckpt_, dir_);
  if (!meta.contains("sharding")) throw Error(what + ": a sharded checkpoint without its layout");
  layout_ = layout_from_json(meta["sharding"].dump(), what);
  if (layout_->world_size != ckpt_.shard_world) {
    throw Error(fmt::format("{}: the layout is for {} ranks, the manifest lists {} shards", what,
                            layout_->world_size, ckpt_.shard_world));
  }
  layout_json_ = layout_to_json(*layout_);
}

void CheckpointReader::read_every_shard() {
  if (every_shard_ || !layout_) return;
  ckpt_.shards = load_checkpoint(dir_).shards;
  every_shard_ = true;
}

const io::NamedTensors& CheckpointReader::rng_state() const {
  if (!layout_) return ckpt_.state;
  static const io::NamedTensors none;
  if (every_shard_) return rank_ < static_cast<int>(ckpt_.shards.size()) ? ckpt_.shards[rank_] : none;
  return ckpt_.shards.empty() ? none : ckpt_.shards.front();
}

const io::NamedTensors* CheckpointReader::own_shard(const std::string& layout_json) {
  if (!layout_ || layout_json != layout_json_) return nullptr;
  if (every_shard_) return &ckpt_.shards.at(rank_);
  return ckpt_.shards.empty() ? nullptr : &ckpt_.shards.front();
}

std::vector<std::string> CheckpointReader::optimizer_kinds() {
  std::set<std::string> kinds;
  for (const auto& [key, _] : ckpt_.optimizer) kinds.insert(split_key(key).second);
  if (layout_) {
    // Every rank's shard holds the same kinds; this rank's is at hand (or rank 0's, read as
    // part of every shard).
    const io::NamedTensors* any = ckpt_.shards.empty() ? nullptr : &ckpt_.shards.front();
    if (any == nullptr) {
      read_every_shard();
      any = &ckpt_.shards.front();
    }
    for (const std::string& kind : shard_kinds(*any)) kinds.insert(kind);
  }
  kinds.erase("param");
  kinds.erase("");
  return {kinds.begin(), kinds.end()};
}

std::map<std::string, at::Tensor> CheckpointReader::whole(const std::string& kind) {
  std::map<std::string, at::Tensor> out;
  if (kind == "param") {
    for (const auto& [name, t] : ckpt_.model) out[name] = t;
  } else {
    for (const auto& [key, t] : ckpt_.optimizer) {
      auto [name, k] = split_key(key);
      if (k == kind) out[name] = t;
    }
  }
  if (layout_) {
    read_every_shard();
    for (auto& [name, t] : unshard(*layout_, ckpt_.shards, kind)) out[name] = std::move(t);
  }
  return out;
}

}  // namespace frugal::dist
