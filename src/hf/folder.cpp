#include "frugal/hf/folder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "frugal/io/atomic_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "checked_weights.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::hf {
namespace {

// frugal's name for a transformers parameter name.
std::string frugal_name(const std::string& name) {
  return name.rfind("model.", 0) == 0 ? name.substr(6) : name;
}

}  // namespace

io::NamedTensors read_weights(const fs::path& dir) {
  std::vector<fs::path> files;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json doc = json_input::parse_file(index, json_input::kIndexMaxBytes);
    const json_input::Node j(doc, index.string());
    const json_input::Node map = j.at("weight_map");
    std::set<std::string> shards;
    for (const auto& [name, value] : map.object().items()) {
      const std::string file =
          json_input::Node(value, index.string(), map.key() + "[" + json(name).dump() + "]")
              .string();
      // A shard is a file of this folder: a path that leads elsewhere is not read.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        map.fail(fmt::format("{}: '{}' is not a file name in the folder", json(name).dump(), file));
      }
      shards.insert(file);
    }
    if (shards.empty()) map.fail("names no tensor");
    for (const auto& s : shards) files.push_back(dir / s);
  } else if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else {
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json",
                            dir.string()));
  }
  io::NamedTensors out;
  for (const fs::path& f : files) {
    for (auto& [name, t] : io::map_safetensors(f)) out.emplace_back(frugal_name(name), std::move(t));
  }
  return out;
}

io::NamedTensors checked_weights(torch::nn::Module& model, const fs::path& dir) {
  std::map<std::string, at::Tensor> given;
  for (auto& [name, t] : read_weights(dir)) given[name] = std::move(t);
  io::NamedTensors out;
  std::set<std::string> params;
  for (auto& p : model.named_parameters(/*recurse=*/true)) {
    params.insert(p.key());
    auto it = given.find(p.key());
    if (it == given.end()) {
      throw Error(fmt::format("{}: the weights have no '{}'", dir.string(), p.key()));
    }
    if (it->second.sizes() != p.value().sizes()) {
      throw Error(fmt::format("{}: '{}' is {} in the weights, {} in the model", dir.string(),
                              p.key(), fmt::join(it->second.sizes(), "x"),
                              fmt::join(p.value().sizes(), "x")));
    }
    out.emplace_back(p.key(), it->second);
  }
  for (const auto& [name, t] : given) {
    if (params.count(name)) continue;
    // Tied models: transformers may save the output projection that is the embedding.
    if (name == "lm_head.weight" && given.count("embed_tokens.weight") &&
        at::equal(t, given.at("embed_tokens.weight"))) {
      continue;
    }
    throw Error(fmt::format("{}: '{}' is not a parameter of the model{}", dir.string(), name,
                            name == "lm_head.weight" ? " (model.tie_embeddings is true, and this "
                                                       "lm_head differs from the embedding)"
                                                     : ""));
  }
  return out;
}

namespace {

// A folder's weights read by parameter name, as a checkpoint of whole tensors without
// optimizer state would be.
class FolderState final : public SavedState {
 public:
  FolderState(io::NamedTensors weights, std::string what)
      : weights_(std::move(weights)), what_(std::move(what)) {}
  // A rank's slices, copied out of the mapped file (into their places, or as copies); the
  // pages each read leave the rank's resident memory at once (io::release_mapped_pages), so
  // that under zero3 a rank holds its shards, not the folder.
  void read_ranges(std::vector<SavedRange>& ranges) override {
    for (SavedRange& r : ranges) {
      const at::Tensor slice = SavedState::read_range(r.kind, r.name, r.begin, r.count);
      if (r.into.defined()) {
        r.into.copy_(slice.view(r.into.sizes()));
      } else {
        r.into = slice.clone();
      }
      io::release_mapped_pages(slice);
    }
  }
  std::string what() const override { return what_; }
  bool has_shards() const override { return false; }
  const io::NamedTensors& model() override { return weights_; }
  std::map<std::string, at::Tensor> whole(const std::string& kind) override {
    if (kind != "param") return {};
    return {weights_.begin(), weights_.end()};
  }
  std::vector<std::string> optimizer_kinds() override { return {}; }
  SavedShard* own_shard(const std::string&) override { return nullptr; }
  const io::NamedTensors& state() override { return state_; }

 private:
  io::NamedTensors weights_;
  io::NamedTensors state_;  // no loss scaler state
  std::string what_;
};

}  // namespace

void load_weights(torch::nn::Module& model, const fs::path& dir) {
  torch::NoGradGuard no_grad;
  const io::NamedTensors weights = checked_weights(model, dir);
  auto params = model.named_parameters(/*recurse=*/true);
  for (const auto& [name, t] : weights) params[name].copy_(t);
}

std::unique_ptr<SavedState> weights_state(torch::nn::Module& model, const fs::path& dir) {
  return std::make_unique<FolderState>(checked_weights(model, dir), dir.string());
}

io::PendingTensors to_transformers(const ModelConfig& model, const io::PendingTensors& tensors) {
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  if (!spec || !spec->hf.tensor_name) {
    throw Error(fmt::format("export --format hf: model.type {} has no transformers layout",
                            model.type));
  }
  io::PendingTensors out;
  for (const io::PendingTensor& p : tensors) {
    const HfTensorName hf = spec->hf.tensor_name(model, p.name);
    io::PendingTensor mapped{hf.name, p.shape, p.dtype, p.read};
    if (hf.transposed) {
      std::reverse(mapped.shape.begin(), mapped.shape.end());
      mapped.read = [read = p.read] { return read().t().contiguous(); };
    }
    out.push_back(std::move(mapped));
  }
  return out;
}

io::NamedTensors to_transformers(const ModelConfig& model, const io::NamedTensors& tensors) {
  return io::read_all(to_transformers(model, io::pending(tensors)), "export --format hf");
}

void write_folder(const fs::path& out, const ModelConfig& model, const io::NamedTensors& tensors,
                  int64_t max_shard_bytes, const fs::path& tokenizer_dir, const TokenIds& ids) {
  write_folder(out, model, io::pending(tensors), max_shard_bytes, tokenizer_dir, ids);
}

void write_folder(const fs::path& out, const ModelConfig& model, const io::PendingTensors& tensors,
                  int64_t max_shard_bytes, const fs::path& tokenizer_dir, const TokenIds& ids) {
  if (fs::exists(out)) {
    throw Error(fmt::format("export: '{}' already exists (pass --overwrite to replace it)",
                            out.string()));
  }
  json config_doc = json::parse(model_config_json(model));
  json generation = {{"_from_model_config", true}};
  if (!ids.bos.empty()) config_doc["bos_token_id"] = generation["bos_token_id"] = json::parse(ids.bos);
  if (!ids.eos.empty()) config_doc["eos_token_id"] = generation["eos_token_id"] = json::parse(ids.eos);
  const std::string config = config_doc.dump(2);
  const io::PendingTensors named = to_transformers(model, tensors);
  // Shards of at most max_shard_bytes, in the tensors' order (a tensor larger than that is a
  // shard of its own); each tensor read only when its shard is written.
  std::vector<io::PendingTensors> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const auto& item : named) {
    const int64_t bytes = item.nbytes();
    if (in_shard > 0 && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(item);
    in_shard += bytes;
    total += bytes;
  }
  // A failure on the way (a full disk, an unreadable tokenizer file) leaves no half-written
  // folder behind.
  io::write_directory_atomic(out, [&](const fs::path& tmp) {
    io::write_file_atomic(tmp / "config.json", config);
    const std::map<std::string, std::string> meta = {{"format", "pt"}};
    if (shards.size() == 1) {
      io::write_safetensors(tmp / "model.safetensors", shards.front(), meta);
    } else {
      json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
      for (size_t i = 0; i < shards.size(); ++i) {
        const std::string file =
            fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
        io::write_safetensors(tmp / file, shards[i], meta);
        for (const auto& p : shards[i]) index["weight_map"][p.name] = file;
      }
      io::write_file_atomic(tmp / "model.safetensors.index.json", index.dump(2));
    }
    if (!tokenizer_dir.empty()) {
      for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                               "tokenizer.model", "vocab.json", "merges.txt",
                               "generation_config.json"}) {
        if (!fs::exists(tokenizer_dir / name)) continue;
        std::error_code ec;
        fs::copy_file(tokenizer_dir / name, tmp / name, ec);
        if (ec) {
          throw Error(fmt::format("export: cannot copy '{}': {}", (tokenizer_dir / name).string(),
                                  ec.message()));
        }
      }
    }
    // transformers' generate reads its stopping ids from here first.
    if (!ids.eos.empty() && !fs::exists(tmp / "generation_config.json")) {
      io::write_file_atomic(tmp / "generation_config.json", generation.dump(2));
    }
  });
}

}  // namespace frugal::hf
