// model.type gpt: GPT-2's shapes (learned absolute positions, so no position ids).
#include "builtin_specs.h"
#include "frugal/models/gpt.h"

namespace frugal::models_detail {

ModelSpec gpt_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) { return std::make_shared<Gpt>(GptOptions::from(c)); };
  s.keys = transformer_keys();
  s.keys.insert(s.keys.end(), {"dropout", "bias"});
  s.check = check_transformer;
  s.inputs = ModelSpec::Inputs::tokens;
  return s;
}

}  // namespace frugal::models_detail
