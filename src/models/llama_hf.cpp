// model.type llama and Hugging Face folders: config.json read (model.init_from) and written
// (frugal export --format hf), and the tensors' names (frugal's are transformers' without the
// leading "model.").
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "builtin_specs.h"
#include "frugal/util/json_input.h"

namespace frugal::models_detail {
namespace {

// The sizes frugal accepts from a config.json (docs/models.md, "Hostile files"): far above any
// released model (Llama 3.1 405B: hidden_size 16384, 126 layers, 128256 tokens), far below
// what would make building the model an absurd allocation before its weights are looked at.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxWidth = int64_t{1} << 16;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 24;

// config.json of a LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM (the sizes,
// grouped-query heads, rotary base and scaling, RMSNorm epsilon, tied embeddings, Qwen2's q/k/v
// biases). What frugal's Llama cannot express (a head_dim other than hidden / heads, MLP or
// output biases, another rope_type, sliding windows) fails naming the key.
void read_llama_config(const json_input::Node& c, const std::string& type, ModelConfig& m) {
  m.vocab_size = c.at("vocab_size").integer(1, kMaxVocab);
  m.n_embd = c.at("hidden_size").integer(1, kMaxWidth);
  m.intermediate_size = c.at("intermediate_size").integer(1, kMaxIntermediate);
  m.n_layer = c.at("num_hidden_layers").integer(1, kMaxLayers);
  m.n_head = c.at("num_attention_heads").integer(1, kMaxWidth);
  m.n_kv_head = c.integer_or("num_key_value_heads", m.n_head, 1, kMaxWidth);
  m.block_size = c.integer_or("max_position_embeddings", m.block_size, 1, kMaxPositions);
  m.rms_norm_eps = c.number_or("rms_norm_eps", 1e-6, 0, 1);
  m.tie_embeddings = c.boolean_or("tie_word_embeddings", type != "llama" && type != "mistral");
  m.qkv_bias = type == "qwen2";
  m.dropout = 0.0;
  // Relations, in the file's words (validation would name frugal's model.n_head instead).
  if (m.n_embd % m.n_head != 0) {
    c.at("num_attention_heads")
        .fail(fmt::format("{} does not divide hidden_size {}", m.n_head, m.n_embd));
  }
  if (m.n_head % m.n_kv_head != 0) {
    c.at("num_key_value_heads")
        .fail(fmt::format("{} does not divide num_attention_heads {}", m.n_kv_head, m.n_head));
  }
  if ((m.n_embd / m.n_head) % 2 != 0) {
    c.at("num_attention_heads")
        .fail(fmt::format("hidden_size {} / {} heads is odd; rotary embeddings need an even "
                          "head size",
                          m.n_embd, m.n_head));
  }
  if (m.rms_norm_eps <= 0 || m.rms_norm_eps >= 1) {
    c.at("rms_norm_eps")
        .fail(fmt::format("expected a number between 0 and 1, got {}", m.rms_norm_eps));
  }
  if (auto head_dim = c.find("head_dim")) {
    const int64_t hd = head_dim->integer(1, kMaxWidth);
    if (hd * m.n_head != m.n_embd) {
      head_dim->fail(
          fmt::format("{} x {} heads is not hidden_size {}: frugal's Llama has "
                      "head_dim = hidden_size / num_attention_heads",
                      hd, m.n_head, m.n_embd));
    }
  }
  if (c.boolean_or("attention_bias", false)) {
    c.at("attention_bias")
        .fail(
            "true (biases on q, k, v and o) is not supported; Qwen2's q/k/v "
            "biases are (model_type qwen2)");
  }
  if (c.boolean_or("mlp_bias", false)) c.at("mlp_bias").fail("true is not supported");
  if (c.boolean_or("use_sliding_window", false))
    c.at("use_sliding_window").fail("true is not supported");
  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu") c.at("hidden_act").fail(fmt::format("'{}' (frugal's Llama uses silu)", act));
  // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; 4.x wrote
  // rope_theta at the top and rope_scaling {rope_type (or type), ...}.
  std::optional<json_input::Node> rope = c.find("rope_parameters");
  if (!rope) rope = c.find("rope_scaling");
  const nlohmann::json empty = nlohmann::json::object();
  if (!rope) rope = json_input::Node(empty, c.file());
  rope->object();
  m.rope_theta =
      rope->number_or("rope_theta", c.number_or("rope_theta", 10000.0, 0, 1e12), 0, 1e12);
  if (m.rope_theta <= 0) {
    (rope->find("rope_theta") ? *rope->find("rope_theta") : c.at("rope_theta"))
        .fail("expected a positive number, got 0");
  }
  const std::string rope_type = rope->string_or("rope_type", rope->string_or("type", "default"));
  if (rope_type == "default") {
    m.rope_scaling = "none";
  } else if (rope_type == "llama3") {
    m.rope_scaling = "llama3";
    m.rope_factor = rope->at("factor").number(1, 1e6);
    m.rope_low_freq_factor = rope->at("low_freq_factor").number(0, 1e6);
    m.rope_high_freq_factor = rope->at("high_freq_factor").number(0, 1e6);
    m.rope_original_max_position =
        rope->at("original_max_position_embeddings").integer(1, kMaxPositions);
    if (!(m.rope_high_freq_factor > m.rope_low_freq_factor && m.rope_low_freq_factor > 0)) {
      rope->at("high_freq_factor")
          .fail(fmt::format("expected more than low_freq_factor {} > 0, got {}",
                            m.rope_low_freq_factor, m.rope_high_freq_factor));
    }
  } else {
    (rope->find("rope_type") ? *rope->find("rope_type") : rope->at("type"))
        .fail(fmt::format("'{}' is not supported (default, llama3)", rope_type));
  }
}

std::string write_llama_config(const ModelConfig& m) {
  nlohmann::json c;
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
  nlohmann::json rope = {{"rope_theta", m.rope_theta}, {"rope_type", "default"}};
  if (m.rope_scaling == "llama3") {
    rope["rope_type"] = "llama3";
    rope["factor"] = m.rope_factor;
    rope["low_freq_factor"] = m.rope_low_freq_factor;
    rope["high_freq_factor"] = m.rope_high_freq_factor;
    rope["original_max_position_embeddings"] = m.rope_original_max_position;
  }
  c["rope_parameters"] = rope;
  return c.dump(2);
}

HfTensorName llama_tensor_name(const ModelConfig&, const std::string& name) {
  return {name == "lm_head.weight" ? name : "model." + name};
}

}  // namespace

HfMapping llama_hf() {
  HfMapping hf;
  hf.model_types = {"llama", "mistral", "qwen2"};
  hf.read_config = read_llama_config;
  hf.write_config = write_llama_config;
  hf.tensor_name = llama_tensor_name;
  return hf;
}

}  // namespace frugal::models_detail
