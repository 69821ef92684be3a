#include "frugal/models/registry.h"

#include "frugal/config/named_registry.h"
#include "frugal/models/convnet.h"
#include "frugal/models/gpt.h"
#include "frugal/models/llama.h"
#include "frugal/models/mlp.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

// model.type is not restricted to known names in config validation: a program registers its
// models before it loads a config, and the name is checked here, when the model is built.
NamedRegistry<ModelFactory>& registry() {
  static NamedRegistry<ModelFactory> r(
      "model.type", "model",
      {
          {"gpt", [](const ModelConfig& c) { return std::make_shared<Gpt>(GptOptions::from(c)); }},
          {"llama",
           [](const ModelConfig& c) { return std::make_shared<Llama>(LlamaOptions::from(c)); }},
          {"mlp",
           [](const ModelConfig& c) {
             return std::make_shared<Mlp>(c.in_features, c.hidden, c.out_features);
           }},
          {"convnet",
           [](const ModelConfig& c) {
             return std::make_shared<ConvNet>(c.in_channels, c.image_size, c.channels,
                                              c.num_classes);
           }},
      },
      /*validated=*/false);
  return r;
}

}  // namespace

void register_model(const std::string& type, ModelFactory factory) {
  if (type.empty() || !factory)
    throw std::invalid_argument("register_model: empty name or factory");
  registry().add(type, std::move(factory));
}

std::vector<std::string> registered_models() { return registry().names(); }

std::shared_ptr<Model> make_model(const ModelConfig& cfg) { return registry().get(cfg.type)(cfg); }

}  // namespace frugal
