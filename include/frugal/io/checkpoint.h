// Whole (unsharded) checkpoints. A checkpoint is a directory
//   <checkpoints>/step_00000120/
//     model.pt       parameters and buffers by name (torch pickle of a name -> tensor dict)
//     optimizer.pt   the optimizer's own archive (torch::optim serialize)
//     state.pt       RNG states and other tensors of the trainer
//     meta.json      step, data position, config fingerprint, free-form trainer state
//     manifest.json  every file above with its size and content hash; written last
// built in a temporary directory and published with one rename, so a crash never leaves a
// half-written checkpoint under a real name; loading verifies the manifest first.
#pragma once

#include <ATen/core/Tensor.h>

#include "frugal/io/named_tensors.h"

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace frugal {

using NamedTensors = io::NamedTensors;

struct Checkpoint {
  int64_t step = 0;
  NamedTensors model;      // parameters and buffers
  std::string optimizer;   // bytes of the optimizer's archive
  NamedTensors state;      // RNG states etc.
  std::string meta_json;   // a JSON object with the trainer's own fields
};

// Writes <dir>/step_<step>/ atomically, then removes all but the newest keep_last
// checkpoints (keep_last <= 0 keeps all). Refuses to replace an existing checkpoint.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const Checkpoint& ckpt,
                                      int64_t keep_last);
// Reads and verifies one checkpoint directory; a missing, truncated or corrupt one is a
// frugal::Error naming the file.
Checkpoint load_checkpoint(const std::filesystem::path& checkpoint_dir);
// The newest complete checkpoint under dir (by step), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
// All complete checkpoints under dir, oldest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

}  // namespace frugal
