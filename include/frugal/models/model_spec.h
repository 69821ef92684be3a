// What a model type is, for everything outside its own code that must know: one registry
// entry (models/registry.h) holds how to build it, the model.* keys it reads, its checks, and
// the facts that config validation, the data, the planner and the out-of-memory advice ask
// (what it reads, whether it takes position ids, how many classes it predicts) and its sizes
// for model.size. The built-in
// types are one file each (src/models/*_spec.cpp); a type registered from user code with a
// spec gets the same validation and the same treatment. Kept free of torch's headers: config
// validation reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/config/config_check.h"

namespace frugal {

class Model;
using ModelFactory = std::function<std::shared_ptr<Model>(const ModelConfig&)>;

// A named size of a model type (model.size): the model keys it fills. Keys the config writes
// win over it, wherever they are written (config/bind.cpp).
struct ModelPreset {
  std::string name;
  std::function<void(ModelConfig&)> fill;
  std::vector<std::string> keys;  // the model.* keys it fills
};

struct ModelSpec {
  // What its inputs are: token sequences (a language model: model.vocab_size is its vocabulary,
  // synthetic data is token text), feature vectors or images (classifiers), or other (a
  // registered type that says nothing: no synthetic data for it).
  enum class Inputs { tokens, features, images, other };

  ModelFactory build;
  // The model.* keys it reads besides model.type and the fine-tuning keys: the resolved config
  // (config show, config.resolved.yaml) and the run's fingerprint leave the others out. Empty:
  // every key (a type that lists none). Reading loss_chunk_tokens means it has the chunked
  // loss (the planner's figures follow it).
  std::vector<std::string> keys;
  // Its checks beyond the keys' types, including against the data section (each failure
  // through the ConfigCheck, naming the key). None: nothing to check.
  std::function<void(const ModelConfig&, const DataConfig&, const ConfigCheck&)> check;
  Inputs inputs = Inputs::other;
  // Whether its forward takes position ids (Model::forward_batch), which packed samples and
  // documents kept apart (data.packing, data.eot_token) need.
  bool position_ids = false;
  // The classes a classifier predicts, which its labels are checked against (0: not checked).
  std::function<int64_t(const ModelConfig&)> classes;
  // Its sizes for model.size. A type with presets takes only its own; one without may use any
  // type's (as a shape).
  std::vector<ModelPreset> presets;

  bool reads_key(const std::string& key) const;
  // Whether it lists model.loss_chunk_tokens among its keys (it computes the loss in chunks).
  bool chunked_loss() const;
};

// The spec of model.type `type` (built in or registered), none for an unknown type.
std::optional<ModelSpec> find_model_spec(const std::string& type);

// The preset `name` of whichever type has it, with that type; none when no type has it.
struct FoundPreset {
  std::string type;
  ModelPreset preset;
};
std::optional<FoundPreset> find_model_preset(const std::string& name);
// The names model.size accepts for a model type ("" = every type), in registration and table
// order (for help texts and docs).
std::vector<std::string> model_preset_names(const std::string& type = "");

}  // namespace frugal
