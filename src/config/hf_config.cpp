#include "frugal/config/hf_config.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::hf {
namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: no such file", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
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
  // json's type errors ("type must be number, but is string") name no key: each read notes
  // the key it reads, for the message.
  std::string key;
  auto at = [&key](const json& obj, const char* name) -> const json& {
    key = name;
    return obj.at(name);
  };
  auto value = [&key](const json& obj, const char* name, auto fallback) {
    key = name;
    return obj.value(name, fallback);
  };
  try {
    m.type = "llama";
    m.size.clear();
    m.vocab_size = at(c, "vocab_size").get<int64_t>();
    m.n_embd = at(c, "hidden_size").get<int64_t>();
    m.intermediate_size = at(c, "intermediate_size").get<int64_t>();
    m.n_layer = at(c, "num_hidden_layers").get<int64_t>();
    m.n_head = at(c, "num_attention_heads").get<int64_t>();
    m.n_kv_head = value(c, "num_key_value_heads", m.n_head);
    m.block_size = value(c, "max_position_embeddings", m.block_size);
    m.rms_norm_eps = value(c, "rms_norm_eps", 1e-6);
    m.tie_embeddings = value(c, "tie_word_embeddings", type != "llama" && type != "mistral");
    m.qkv_bias = type == "qwen2";
    m.dropout = 0.0;
    if (c.contains("head_dim") && !c["head_dim"].is_null() &&
        at(c, "head_dim").get<int64_t>() * m.n_head != m.n_embd) {
      fail("head_dim", fmt::format("{} x {} heads is not hidden_size {}: frugal's Llama has "
                                   "head_dim = hidden_size / num_attention_heads",
                                   c["head_dim"].get<int64_t>(), m.n_head, m.n_embd));
    }
    if (value(c, "attention_bias", false)) {
      fail("attention_bias", "true (biases on q, k, v and o) is not supported; Qwen2's q/k/v "
                             "biases are (model_type qwen2)");
    }
    if (value(c, "mlp_bias", false)) fail("mlp_bias", "true is not supported");
    if (value(c, "use_sliding_window", false)) fail("use_sliding_window", "true is not supported");
    const std::string act = value(c, "hidden_act", std::string("silu"));
    if (act != "silu") fail("hidden_act", fmt::format("'{}' (frugal's Llama uses silu)", act));
    // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; 4.x wrote
    // rope_theta at the top and rope_scaling {rope_type (or type), ...}.
    json rope = c.contains("rope_parameters") && c["rope_parameters"].is_object()
                    ? c["rope_parameters"]
                    : (c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"]
                                                                                    : json::object());
    m.rope_theta = value(rope, "rope_theta", value(c, "rope_theta", 10000.0));
    std::string rope_type = value(rope, "rope_type", value(rope, "type", std::string("default")));
    if (rope_type == "default") {
      m.rope_scaling = "none";
    } else if (rope_type == "llama3") {
      m.rope_scaling = "llama3";
      m.rope_factor = at(rope, "factor").get<double>();
      m.rope_low_freq_factor = at(rope, "low_freq_factor").get<double>();
      m.rope_high_freq_factor = at(rope, "high_freq_factor").get<double>();
      m.rope_original_max_position = at(rope, "original_max_position_embeddings").get<int64_t>();
    } else {
      fail("rope_type", fmt::format("'{}' is not supported (default, llama3)", rope_type));
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}: {}", what, key, e.what()));
  }
  return m;
}

std::string model_config_json(const ModelConfig& m) {
  json c;
  if (m.type == "llama") {
    const bool qwen2 = m.qkv_bias;
    c["architectures"] = {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
    c["model_type"] = qwen2 ? "qwen2" : "llama";
    c["vocab_size"] = m.vocab_size;
    c["hidden_size"] = m.n_embd;
    c["intermediate_size"] =
        m.intermediate_size > 0 ? m.intermediate_size : (8 * m.n_embd / 3 + 255) / 256 * 256;
    c["num_hidden_layers"] = m.n_layer;
    c["num_attention_heads"] = m.n_head;
    c["num_key_value_heads"] = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
    c["head_dim"] = m.n_embd / m.n_head;
    c["max_position_embeddings"] = m.block_size;
    c["rms_norm_eps"] = m.rms_norm_eps;
    c["tie_word_embeddings"] = m.tie_embeddings;
    c["hidden_act"] = "silu";
    if (!qwen2) {
      c["attention_bias"] = false;
      c["mlp_bias"] = false;
    }
    json rope = {{"rope_theta", m.rope_theta}, {"rope_type", "default"}};
    if (m.rope_scaling == "llama3") {
      rope["rope_type"] = "llama3";
      rope["factor"] = m.rope_factor;
      rope["low_freq_factor"] = m.rope_low_freq_factor;
      rope["high_freq_factor"] = m.rope_high_freq_factor;
      rope["original_max_position_embeddings"] = m.rope_original_max_position;
    }
    c["rope_parameters"] = rope;
  } else if (m.type == "gpt") {
    if (!m.bias) {
      throw Error("export --format hf: GPT2LMHeadModel has biases; this gpt was trained with "
                  "model.bias false");
    }
    c["architectures"] = {"GPT2LMHeadModel"};
    c["model_type"] = "gpt2";
    c["vocab_size"] = m.vocab_size;
    c["n_positions"] = m.block_size;
    c["n_embd"] = m.n_embd;
    c["n_layer"] = m.n_layer;
    c["n_head"] = m.n_head;
    c["activation_function"] = "gelu_new";  // GELU's tanh approximation, as frugal's GPT
    c["layer_norm_epsilon"] = 1e-5;
    c["tie_word_embeddings"] = true;
    for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) c[key] = m.dropout;
  } else {
    throw Error(fmt::format("export --format hf: model.type {} has no transformers "
                            "architecture (gpt and llama do)",
                            m.type));
  }
  c["dtype"] = "float32";
  return c.dump(2);
}

}  // namespace frugal::hf
