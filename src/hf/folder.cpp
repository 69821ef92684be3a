#include "frugal/hf/folder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "frugal/io/atomic_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::hf {
namespace {

json read_json(const fs::path& path) {
  if (!fs::exists(path)) throw Error(fmt::format("{}: no such file", path.string()));
  try {
    return json::parse(io::read_file(path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

// frugal's name for a transformers parameter name.
std::string frugal_name(const std::string& name) {
  return name.rfind("model.", 0) == 0 ? name.substr(6) : name;
}

}  // namespace

ModelConfig read_model_config(const fs::path& dir, ModelConfig m) {
  const fs::path file = dir / "config.json";
  const json c = read_json(file);
  const std::string what = file.string();
  auto fail = [&](const std::string& key, const std::string& message) {
    throw Error(fmt::format("{}: {}: {}", what, key, message));
  };
  const std::string type = c.value("model_type", std::string());
  if (type != "llama" && type != "mistral" && type != "qwen2") {
    fail("model_type", fmt::format("'{}' is not a Llama-family model (llama, mistral, qwen2)", type));
  }
  try {
    m.type = "llama";
    m.size.clear();
    m.vocab_size = c.at("vocab_size").get<int64_t>();
    m.n_embd = c.at("hidden_size").get<int64_t>();
    m.intermediate_size = c.at("intermediate_size").get<int64_t>();
    m.n_layer = c.at("num_hidden_layers").get<int64_t>();
    m.n_head = c.at("num_attention_heads").get<int64_t>();
    m.n_kv_head = c.value("num_key_value_heads", m.n_head);
    m.block_size = c.value("max_position_embeddings", m.block_size);
    m.rms_norm_eps = c.value("rms_norm_eps", 1e-6);
    m.tie_embeddings = c.value("tie_word_embeddings", type != "llama" && type != "mistral");
    m.qkv_bias = type == "qwen2";
    m.dropout = 0.0;
    if (c.contains("head_dim") && !c["head_dim"].is_null() &&
        c["head_dim"].get<int64_t>() * m.n_head != m.n_embd) {
      fail("head_dim", fmt::format("{} x {} heads is not hidden_size {}: frugal's Llama has "
                                   "head_dim = hidden_size / num_attention_heads",
                                   c["head_dim"].get<int64_t>(), m.n_head, m.n_embd));
    }
    if (c.value("attention_bias", false)) {
      fail("attention_bias", "true (biases on q, k, v and o) is not supported; Qwen2's q/k/v "
                             "biases are (model_type qwen2)");
    }
    if (c.value("mlp_bias", false)) fail("mlp_bias", "true is not supported");
    if (c.value("use_sliding_window", false)) fail("use_sliding_window", "true is not supported");
    const std::string act = c.value("hidden_act", std::string("silu"));
    if (act != "silu") fail("hidden_act", fmt::format("'{}' (frugal's Llama uses silu)", act));
    // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; 4.x wrote
    // rope_theta at the top and rope_scaling {rope_type (or type), ...}.
    json rope = c.contains("rope_parameters") && c["rope_parameters"].is_object()
                    ? c["rope_parameters"]
                    : (c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"]
                                                                                    : json::object());
    m.rope_theta = rope.value("rope_theta", c.value("rope_theta", 10000.0));
    std::string rope_type = rope.value("rope_type", rope.value("type", std::string("default")));
    if (rope_type == "default") {
      m.rope_scaling = "none";
    } else if (rope_type == "llama3") {
      m.rope_scaling = "llama3";
      m.rope_factor = rope.at("factor").get<double>();
      m.rope_low_freq_factor = rope.at("low_freq_factor").get<double>();
      m.rope_high_freq_factor = rope.at("high_freq_factor").get<double>();
      m.rope_original_max_position = rope.at("original_max_position_embeddings").get<int64_t>();
    } else {
      fail("rope_type", fmt::format("'{}' is not supported (default, llama3)", rope_type));
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", what, e.what()));
  }
  return m;
}

io::NamedTensors read_weights(const fs::path& dir) {
  std::vector<fs::path> files;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json j = read_json(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw Error(index.string() + ": no weight_map");
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) shards.insert(file.get<std::string>());
    for (const auto& s : shards) files.push_back(dir / s);
  } else if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else {
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json",
                            dir.string()));
  }
  io::NamedTensors out;
  for (const fs::path& f : files) {
    for (auto& [name, t] : io::read_safetensors(f)) out.emplace_back(frugal_name(name), std::move(t));
  }
  return out;
}

void load_weights(torch::nn::Module& model, const fs::path& dir) {
  std::map<std::string, at::Tensor> given;
  for (auto& [name, t] : read_weights(dir)) given[name] = std::move(t);
  torch::NoGradGuard no_grad;
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
    p.value().copy_(it->second);
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
}

}  // namespace frugal::hf
