// Models by YAML name (model.type). The built-ins (gpt, mlp, convnet) are always there;
// embedding code adds its own with register_model("name", factory) before loading a config.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/models/model.h"

namespace frugal {

using ModelFactory = std::function<std::shared_ptr<Model>(const ModelConfig&)>;

// Adds a model type; a name already taken (built in or registered) is a frugal::Error.
void register_model(const std::string& type, ModelFactory factory);
std::vector<std::string> registered_models();
// Builds model.type; an unknown type is a frugal::Error listing the known ones.
std::shared_ptr<Model> make_model(const ModelConfig& cfg);

}  // namespace frugal
