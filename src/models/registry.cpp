#include "frugal/models/registry.h"

#include <map>
#include <mutex>

#include "frugal/models/convnet.h"
#include "frugal/models/gpt.h"
#include "frugal/models/mlp.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, ModelFactory> factories;

  Registry() {
    factories["gpt"] = [](const ModelConfig& c) {
      return std::make_shared<Gpt>(GptOptions::from(c));
    };
    factories["mlp"] = [](const ModelConfig& c) {
      return std::make_shared<Mlp>(c.in_features, c.hidden, c.out_features);
    };
    factories["convnet"] = [](const ModelConfig& c) {
      return std::make_shared<ConvNet>(c.in_channels, c.image_size, c.channels, c.num_classes);
    };
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_model(const std::string& type, ModelFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[type] = std::move(factory);
}

std::vector<std::string> registered_models() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, _] : r.factories) names.push_back(name);
  return names;
}

std::shared_ptr<Model> make_model(const ModelConfig& cfg) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(cfg.type);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const auto& name : registered_models()) known += (known.empty() ? "" : ", ") + name;
    throw Error("model.type: unknown model '" + cfg.type + "' (registered: " + known + ")");
  }
  return factory(cfg);
}

}  // namespace frugal
