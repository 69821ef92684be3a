// A trained model's source for what reads one (export, eval, generate): a run directory or a
// checkpoint, its settings and whole weights; or a Hugging Face folder.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/named_tensors.h"
#include "frugal/models/model.h"

namespace frugal {

// The run's settings, from the checkpoint's meta.json (the resolved config it trained with);
// `format` names what needs them in the error of a checkpoint without.
Config checkpoint_config(const std::filesystem::path& dir, const Checkpoint& ckpt,
                         const std::string& format);

// A run directory means its newest checkpoint; a checkpoint directory means itself. `command`
// prefixes the error.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& source,
                                         const std::string& command);

// The checkpoint's whole weights, sharded ones put back together by name.
io::NamedTensors checkpoint_weights(const std::filesystem::path& dir,
                                    dist::CheckpointReader& reader);

// The model `source` holds, as training built it, on the CPU: a Hugging Face folder (a
// config.json and its weights) or a run directory / checkpoint (verified whole first).
struct SourceModel {
  Config cfg;
  std::shared_ptr<Model> model;
};
SourceModel load_source_model(const std::filesystem::path& source, const std::string& command);

}  // namespace frugal
