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
#include "frugal/config/key_rule.h"

namespace frugal {

namespace json_input {
class Node;  // frugal/util/json_input.h
}

class Model;
using ModelFactory = std::function<std::shared_ptr<Model>(const ModelConfig&)>;

// A named size of a model type (model.size): the model keys it fills. Keys the config writes
// win over it, wherever they are written (config/bind.cpp).
struct ModelPreset {
  std::string name;
  std::function<void(ModelConfig&)> fill;
  std::vector<std::string> keys;  // the model.* keys it fills
};

// A model.* key a type reads, with what it accepts there (its range or choices: validation checks
// it when the config chooses this type). Written as its name alone when any value of its type
// will do.
struct ModelKey {
  ModelKey(const char* key, KeyRule accepts = {}) : name(key), rule(std::move(accepts)) {}
  ModelKey(std::string key, KeyRule accepts = {}) : name(std::move(key)), rule(std::move(accepts)) {}
  std::string name;  // without "model."
  KeyRule rule;
};

// A tensor's name in a transformers folder, and whether it is stored there as the transpose of
// frugal's (GPT-2's Conv1D weights are (in, out)).
struct HfTensorName {
  std::string name;
  bool transposed = false;
};

// How a type maps onto Hugging Face folders. A type without it has no transformers layout
// (model.init_from, `frugal export --format hf` and PEFT adapters refuse it, naming it).
struct HfMapping {
  // The config.json model_type values it reads (model.init_from); none: it is written only.
  std::vector<std::string> model_types;
  // Reads config.json (`model_type` is its model_type) into `m`, keeping what the file does not
  // set. The file is hostile: each value through the Node's typed reads, and what frugal's
  // model cannot express a failure naming the key (Node::fail).
  std::function<void(const json_input::Node& config, const std::string& model_type,
                     ModelConfig& m)>
      read_config;
  // The config.json (as JSON text) transformers reads for a model of these settings; settings
  // it cannot express are a frugal::Error.
  std::function<std::string(const ModelConfig&)> write_config;
  // transformers' name of one of frugal's tensors (a frugal::Error for one it has none for).
  std::function<HfTensorName(const ModelConfig&, const std::string& name)> tensor_name;
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
  // loss (the planner's figures follow it). Each with its range or choices.
  std::vector<ModelKey> keys;
  // Its checks between keys beyond each key's rule, including against the data section (each
  // failure through the ConfigCheck, naming the key). None: nothing to check.
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
  // Its Hugging Face mapping (empty functions: none).
  HfMapping hf;

  bool reads_key(const std::string& key) const;
  // The rule it gives `key` (none when it does not read it, or reads every key).
  const KeyRule* key_rule(const std::string& key) const;
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

// The model type that reads config.json's model_type `hf_model_type` (HfMapping::model_types),
// with its spec; none when no type does.
struct FoundSpec {
  std::string type;
  ModelSpec spec;
};
std::optional<FoundSpec> find_hf_model_type(const std::string& hf_model_type);
// Every config.json model_type some type reads, in registration order (for messages).
std::vector<std::string> hf_model_types();

}  // namespace frugal
