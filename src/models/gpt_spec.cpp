// model.type gpt: GPT-2's shapes (learned absolute positions, so no position ids).
#include "builtin_specs.h"
#include "frugal/models/gpt.h"

namespace frugal::models_detail {
namespace {

ModelPreset preset(const char* name, int64_t n_layer, int64_t n_head, int64_t n_embd,
                   int64_t block_size, int64_t vocab_size) {
  return {name,
          [=](ModelConfig& m) {
            m.n_layer = n_layer;
            m.n_head = n_head;
            m.n_embd = n_embd;
            m.block_size = block_size;
            m.vocab_size = vocab_size;
          },
          {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"}};
}

}  // namespace

ModelSpec gpt_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) { return std::make_shared<Gpt>(GptOptions::from(c)); };
  s.keys = transformer_keys();
  s.keys.insert(s.keys.end(), {"dropout", "bias"});
  s.check = check_transformer;
  s.inputs = ModelSpec::Inputs::tokens;
  s.hf = gpt_hf();
  s.presets = {
      //     name       n_layer n_head n_embd block_size vocab_size
      preset("gpt-tiny", 2, 2, 32, 32, 256),
      preset("gpt-mini", 4, 4, 128, 128, 256),
      preset("gpt-small", 6, 6, 384, 256, 256),
      preset("gpt2-124m", 12, 12, 768, 1024, 50304),   // GPT-2 small; vocab 50257 padded to 64s
      preset("gpt2-350m", 24, 16, 1024, 1024, 50304),  // GPT-2 medium
  };
  return s;
}

}  // namespace frugal::models_detail
