// Models by YAML name (model.type). The built-ins (gpt, llama, mlp, convnet) are always there;
// embedding code adds its own before loading a config: with a whole ModelSpec (its keys,
// checks and facts, frugal/models/model_spec.h), or with a factory alone (a type about which
// nothing else is known: every model key shows, no checks, no synthetic data).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/models/model.h"
#include "frugal/models/model_spec.h"

namespace frugal {

// Adds a model type; a name already taken (built in or registered) is a frugal::Error.
void register_model(const std::string& type, ModelSpec spec);
void register_model(const std::string& type, ModelFactory factory);
std::vector<std::string> registered_models();
// Builds model.type; an unknown type is a frugal::Error listing the known ones.
std::shared_ptr<Model> make_model(const ModelConfig& cfg);

}  // namespace frugal
