// Loading, checking and writing configurations. The pipeline, in order:
//   YAML file -> `extends:` parents merged under it -> `--set` overrides -> model.size preset
//   (explicit keys win) -> typed Config -> validate().
// Every user mistake throws frugal::Error with a one-line what(): "file:line:column: message".
// yaml-cpp stays behind this header: nothing here needs it (or torch).
#pragma once

#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

// Reads the YAML file at `path`; `overrides` are "section.key=value" strings (the CLI's --set;
// keys of sub-sections too: "strategy.grad_scaler.init_scale=1024"), the value parsed as YAML
// (so "optim.betas=[0.9,0.95]" works). The result is validated.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The same from YAML text; `source_name` names it in errors, and `extends:` paths are relative
// to its folder (the working directory when it has none).
Config load_config_string(const std::string& yaml_text, const std::string& source_name,
                          const std::vector<std::string>& overrides = {});

// The documented defaults (the struct defaults); not validated against any file.
Config default_config();

// Cross-field and range checks; load_config calls it. Errors name the config's source file
// (and, through load_config, the line and column of the key).
void validate(const Config& config);

// Every field a run of the config reads, as YAML (the other model types' sizes and the other
// data types' source keys are left out: a user-registered model type keeps every model key):
// load_config_string(to_yaml(c), ...) gives back every such field of c exactly (doubles
// written with the shortest text that reads back to the same value).
std::string to_yaml(const Config& config);

// Every key of the schema in documented order (`frugal config keys`): its dotted path, its YAML
// type, its default as YAML, and what it accepts, from the same rules validation checks (for
// model.* keys, `model_type`'s own rule too; a model key that type does not read says so).
struct KeyInfo {
  std::string key, type, default_value, accepts;
};
std::vector<KeyInfo> config_keys(const std::string& model_type = "gpt");

// 16 hex digits hashing what changes the numbers training computes (model, data, optim,
// schedule, strategy; not run, train, generate, memory, distributed, nor data.num_workers /
// data.pin_memory, nor strategy.checkpointing: recomputation saves memory without changing the
// numbers, so a run may be resumed with it turned on or off), so a resume can tell it is being
// given a different configuration.
std::string config_fingerprint(const Config& config);

// The fingerprinted settings in which `saved` (a checkpoint's config) and `ours` differ, one
// line each ("model.n_embd: 32 in the checkpoint, 64 here"), for a refused resume to name them.
std::vector<std::string> fingerprint_differences(const Config& saved, const Config& ours);

// The model settings of a resolved config (config.resolved.yaml, a checkpoint's meta.json),
// without reading model.init_from's folder again (its path is kept).
ModelConfig resolved_model_config(const std::string& yaml_text, const std::string& source_name);
// The whole resolved config the same way (export rebuilds a run's model from its run.seed too).
Config resolved_config(const std::string& yaml_text, const std::string& source_name);

}  // namespace frugal
