// model.type gpt and Hugging Face folders: the GPT2LMHeadModel config.json and tensor names
// `frugal export --format hf` writes (and PEFT adapters name).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "builtin_specs.h"
#include "frugal/util/error.h"

namespace frugal::models_detail {
namespace {

std::string write_gpt_config(const ModelConfig& m) {
  nlohmann::json c;
  if (!m.bias) {
    throw Error(
        "export --format hf: GPT2LMHeadModel has biases; this gpt was trained with "
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
  return c.dump(2);
}

// GPT2LMHeadModel's names ("transformer.h.0.attn.c_attn"); its Conv1D weights store (in, out),
// the transpose of frugal's Linear weights. The tied output has no tensor of its own.
HfTensorName gpt_tensor_name(const ModelConfig&, const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> parts = {
      {"ln1.", "ln_1."},
      {"ln2.", "ln_2."},
      {"attn.qkv.", "attn.c_attn."},
      {"attn.proj.", "attn.c_proj."},
      {"mlp.fc.", "mlp.c_fc."},
      {"mlp.proj.", "mlp.c_proj."}};
  if (name == "tok_emb.weight") return {"transformer.wte.weight"};
  if (name == "pos_emb.weight") return {"transformer.wpe.weight"};
  if (name.rfind("ln_f.", 0) == 0) return {"transformer." + name};
  if (name.rfind("blocks.", 0) == 0) {
    const size_t dot = name.find('.', 7);
    const std::string layer = name.substr(7, dot - 7);
    const std::string rest = dot == std::string::npos ? "" : name.substr(dot + 1);
    for (const auto& [from, to] : parts) {
      if (rest.rfind(from, 0) != 0) continue;
      const std::string suffix = rest.substr(from.size());
      return {"transformer.h." + layer + "." + to + suffix,
              to.find("ln_") != 0 && suffix == "weight"};
    }
  }
  throw Error("export --format hf: no GPT-2 name for '" + name + "'");
}

}  // namespace

HfMapping gpt_hf() {
  HfMapping hf;
  hf.write_config = write_gpt_config;
  hf.tensor_name = gpt_tensor_name;
  return hf;
}

}  // namespace frugal::models_detail
