#include "frugal/distributed/checkpoint_reader.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "frugal/io/checkpoint_meta.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::dist {

namespace {
// "<name>/<kind>" -> (name, kind); parameter names hold dots, never slashes.
std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return {key, std::string()};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// A shard file read entry by entry.
class FileShard final : public SavedShard {
 public:
  explicit FileShard(io::CheckpointFile& file) : file_(file) {}
  const std::vector<std::string>& keys() const override { return file_.names(); }
  at::Tensor read(const std::string& key) override { return file_.read(key); }

 private:
  io::CheckpointFile& file_;
};
}  // namespace

CheckpointReader::CheckpointReader(fs::path dir, int rank)
    : dir_(std::move(dir)), rank_(rank), ckpt_(load_checkpoint_info(dir_)), files_(dir_) {
  // What load_checkpoint_info read whole; the manifest twice (files_ reads it again).
  for (const char* name : {"state.pt", "meta.json", "manifest.json", "manifest.json"}) {
    std::error_code ec;
    const auto size = fs::file_size(dir_ / name, ec);
    if (!ec) info_bytes_ += static_cast<int64_t>(size);
  }
  if (ckpt_.shard_world == 0) return;
  const std::string what = (dir_ / "meta.json").string();
  const nlohmann::json meta = io::checkpoint_meta(ckpt_, dir_);
  if (!meta.contains("sharding")) throw Error(what + ": a sharded checkpoint without its layout");
  layout_ = layout_from_json(meta["sharding"].dump(), what);
  if (layout_->world_size * layout_->replicas != ckpt_.shard_world) {
    throw Error(fmt::format("{}: the layout is for {} ranks{}, the manifest lists {} shards", what,
                            layout_->world_size,
                            layout_->replicas > 1 ? fmt::format(" x {} replicas", layout_->replicas)
                                                  : std::string(),
                            ckpt_.shard_world));
  }
  layout_json_ = layout_to_json(*layout_);
  for (size_t k = 0; k < layout_->flats.size(); ++k) {
    const FlatLayout& f = layout_->flats[k];
    for (size_t i = 0; i < f.names.size(); ++i) where_[f.names[i]] = {k, i};
  }
}

CheckpointReader::~CheckpointReader() = default;

int64_t CheckpointReader::bytes_read() const { return info_bytes_ + files_.bytes_read(); }

io::CheckpointFile* CheckpointReader::model_file() {
  return files_.lists("model.pt") ? &files_.file("model.pt") : nullptr;
}

io::CheckpointFile* CheckpointReader::optimizer_file() {
  return files_.lists("optimizer.pt") ? &files_.file("optimizer.pt") : nullptr;
}

const io::NamedTensors& CheckpointReader::model() {
  if (!model_) model_ = model_except({});
  return *model_;
}

io::NamedTensors CheckpointReader::model_except(const std::set<std::string>& skip) {
  io::NamedTensors out;
  io::CheckpointFile* file = model_file();
  if (file == nullptr) return out;
  for (const std::string& name : file->names()) {
    if (skip.count(name) == 0) out.emplace_back(name, file->read(name));
  }
  return out;
}

io::PendingTensors CheckpointReader::weights() {
  io::PendingTensors out;
  if (layout_) {
    for (const FlatLayout& f : layout_->flats) {
      const std::string key = shard_key(f.name, "param");
      check_shard_entry(0, f, key);
      const at::ScalarType dtype = shard(0).dtype(key);
      for (size_t i = 0; i < f.names.size(); ++i) {
        io::PendingTensor p{f.names[i], f.shapes[i], dtype, {}};
        // Into a tensor of its own, piece by piece from the shards that hold it (no
        // concatenation: the value and one piece at a time).
        p.read = [this, name = p.name, shape = p.shape, dtype = p.dtype, numel = p.numel()] {
          std::vector<SavedRange> ranges{{"param", name, 0, numel, at::empty(shape, at::TensorOptions().dtype(dtype))}};
          read_ranges(ranges);
          return ranges.front().into;
        };
        out.push_back(std::move(p));
      }
    }
  }
  if (io::CheckpointFile* file = model_file()) {
    for (const std::string& name : file->names()) {
      out.push_back({name, file->shape(name), file->dtype(name), [file, name] { return file->read(name); }});
    }
  }
  return out;
}

io::CheckpointFile& CheckpointReader::shard(int r) {
  // hsdp's replicas wrote files too (their random generators): the names count every writer.
  return files_.file(shard_file_name(r, ckpt_.shard_world));
}

void CheckpointReader::check_shard_entry(int r, const FlatLayout& flat, const std::string& key) {
  io::CheckpointFile& file = shard(r);
  if (!file.has(key)) {
    throw Error(fmt::format("sharded checkpoint '{}': rank {}'s shard lacks '{}'", dir_.string(), r,
                            key));
  }
  const int64_t expected = split_key(key).second == "step" ? 1 : flat.shard_numel(layout_->world_size);
  if (file.numel(key) != expected) {
    throw Error(fmt::format("sharded checkpoint '{}': rank {}'s '{}' has {} elements, the layout "
                            "says {}", dir_.string(), r, key, file.numel(key), expected));
  }
}

const io::NamedTensors& CheckpointReader::rng_state() {
  if (!layout_) return ckpt_.state;
  if (!rng_) {
    rng_.emplace();
    // Entries without a slash are the writer's own ("rng.cpu"), not a flat buffer's.
    if (rank_ < ckpt_.shard_world) {
      io::CheckpointFile& own = shard(rank_);
      for (const std::string& key : own.names()) {
        if (key.find('/') == std::string::npos) rng_->emplace_back(key, own.read(key));
      }
    }
  }
  return *rng_;
}

SavedShard* CheckpointReader::own_shard(const std::string& layout_json) {
  if (!layout_ || layout_json != layout_json_ || rank_ >= ckpt_.shard_world) return nullptr;
  // The same layout with replicas (hsdp): rank r holds the shards of the first group's rank
  // r mod world_size.
  if (!own_) own_ = std::make_unique<FileShard>(shard(rank_ % layout_->world_size));
  return own_.get();
}

std::vector<std::string> CheckpointReader::optimizer_kinds() {
  std::set<std::string> kinds;
  if (io::CheckpointFile* file = optimizer_file()) {
    for (const std::string& key : file->names()) kinds.insert(split_key(key).second);
  }
  // Every rank's shard holds the same kinds: rank 0's index says which (read anyway for the
  // step counts).
  if (layout_) {
    for (const std::string& key : shard(0).names()) kinds.insert(split_key(key).second);
  }
  kinds.erase("param");
  kinds.erase("");
  return {kinds.begin(), kinds.end()};
}

std::pair<io::CheckpointFile*, std::string> CheckpointReader::saved_whole(const std::string& kind,
                                                                          const std::string& name) {
  io::CheckpointFile* file = kind == "param" ? model_file() : optimizer_file();
  std::string key = kind == "param" ? name : name + "/" + kind;
  if (file != nullptr && !file->has(key)) file = nullptr;
  return {file, std::move(key)};
}

int64_t CheckpointReader::saved_numel(const std::string& kind, const std::string& name) {
  auto it = where_.find(name);
  if (it == where_.end()) {
    const auto [file, key] = saved_whole(kind, name);
    return file == nullptr ? -1 : file->numel(key);
  }
  const FlatLayout& f = layout_->flats[it->second.first];
  if (!shard(0).has(shard_key(f.name, kind))) return -1;  // not stepped before it was saved
  if (kind == "step") return 1;
  int64_t n = 1;
  for (int64_t d : f.shapes[it->second.second]) n *= d;
  return n;
}

at::Tensor CheckpointReader::read_range(const std::string& kind, const std::string& name,
                                        int64_t begin, int64_t count) {
  auto it = where_.find(name);
  if (it == where_.end()) {
    const auto [file, key] = saved_whole(kind, name);
    if (file == nullptr) throw Error(fmt::format("{}: no {} of '{}'", dir_.string(), kind, name));
    return file->read_range(key, begin, count);
  }
  const FlatLayout& f = layout_->flats[it->second.first];
  const std::string key = shard_key(f.name, kind);
  if (kind == "step") {  // one per flat buffer, alike on every rank
    check_shard_entry(0, f, key);
    return shard(0).read(key).reshape({-1});
  }
  // Element e of the parameter is element offset + e of the flat buffer, which rank
  // (offset + e) / shard_numel keeps.
  const int64_t per_rank = f.shard_numel(layout_->world_size);
  const int64_t first = f.offsets[it->second.second] + begin, last = first + count;
  std::vector<at::Tensor> parts;
  for (int64_t r = first / per_rank; first < last && r * per_rank < last; ++r) {
    const int64_t lo = std::max(first, r * per_rank), hi = std::min(last, (r + 1) * per_rank);
    check_shard_entry(static_cast<int>(r), f, key);
    parts.push_back(shard(static_cast<int>(r)).read_range(key, lo - r * per_rank, hi - lo));
  }
  if (parts.empty()) return shard(0).read_range(key, 0, 0);
  return parts.size() == 1 ? parts.front() : at::cat(parts);
}

void CheckpointReader::add_pieces(SavedRange range, std::vector<Piece>& out) {
  auto it = where_.find(range.name);
  if (it == where_.end()) {  // saved whole: one piece, where it lies in model.pt / optimizer.pt
    const auto [file, key] = saved_whole(range.kind, range.name);
    Position at;
    if (file != nullptr) {
      at = {range.kind == "param" ? "model.pt" : "optimizer.pt", file->position(key, range.begin)};
    }  // else read_range names what is missing
    out.push_back({std::move(at), std::move(range)});
    return;
  }
  const FlatLayout& f = layout_->flats[it->second.first];
  const std::string key = shard_key(f.name, range.kind);
  const int world = layout_->world_size;
  const int64_t per_rank = f.shard_numel(world);
  if (range.kind == "step" || range.count <= 0) {  // steps: rank 0's shard holds them
    io::CheckpointFile& file = shard(0);
    out.push_back({{shard_file_name(0, ckpt_.shard_world), file.has(key) ? file.position(key, 0) : 0},
                   std::move(range)});
    return;
  }
  const int64_t first = f.offsets[it->second.second] + range.begin, last = first + range.count;
  const bool split = range.into.defined() && range.into.is_contiguous();
  // A range is cut where the ranks' shards meet: each part is placed in its own shard file.
  for (int64_t r = first / per_rank; r < world && first < last && r * per_rank < last; ++r) {
    const int64_t lo = std::max(first, r * per_rank), hi = std::min(last, (r + 1) * per_rank);
    io::CheckpointFile& file = shard(static_cast<int>(r));
    Position at{shard_file_name(static_cast<int>(r), ckpt_.shard_world),
                file.has(key) ? file.position(key, lo - r * per_rank) : 0};
    if (!split) {
      out.push_back({std::move(at), std::move(range)});
      return;
    }
    out.push_back({std::move(at),
                   {range.kind, range.name, lo - f.offsets[it->second.second], hi - lo,
                    range.into.view({-1}).narrow(0, lo - first, hi - lo)}});
  }
  // Beyond the shards (a corrupt layout): read_range says what is wrong.
  if (first / per_rank >= world) out.push_back({{std::string(), 0}, std::move(range)});
}

void CheckpointReader::read_ranges(std::vector<SavedRange>& ranges) {
  // Each file's pieces in the order of its bytes: a block holding the ends of two ranges (two
  // tensors, or two parameters' parts of one flat buffer) is read once, while it is the last
  // block read, however the caller ordered them (by kind, by parameter).
  std::vector<Piece> pieces;
  std::vector<std::pair<size_t, size_t>> unsplit;  // (range, piece) read as a whole
  for (size_t i = 0; i < ranges.size(); ++i) {
    const size_t before = pieces.size();
    add_pieces(ranges[i], pieces);
    if (!ranges[i].into.defined()) unsplit.emplace_back(i, before);
  }
  std::vector<size_t> order(pieces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pieces[a].at < pieces[b].at; });
  for (size_t i : order) read_range_into(pieces[i].range);
  // Ranges without a tensor to copy into take the one read.
  for (const auto& [range, piece] : unsplit) ranges[range].into = pieces[piece].range.into;
}

std::map<std::string, at::Tensor> CheckpointReader::whole(const std::string& kind) {
  std::map<std::string, at::Tensor> out;
  if (kind == "param") {
    for (auto& [name, t] : model()) out[name] = t;
  } else if (io::CheckpointFile* file = optimizer_file()) {
    for (const std::string& key : file->names()) {
      auto [name, k] = split_key(key);
      if (k == kind) out[name] = file->read(key);
    }
  }
  if (!layout_) return out;
  for (const FlatLayout& f : layout_->flats) {
    for (size_t i = 0; i < f.names.size(); ++i) {
      const int64_t n = saved_numel(kind, f.names[i]);
      if (n < 0) continue;
      at::Tensor t = read_range(kind, f.names[i], 0, n);
      out[f.names[i]] = kind == "step" ? t.reshape({}) : t.view(f.shapes[i]);
    }
  }
  return out;
}

}  // namespace frugal::dist
