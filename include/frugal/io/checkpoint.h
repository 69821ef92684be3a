// Whole (unsharded) checkpoints. A checkpoint is a directory
//   <checkpoints>/step_00000120/
//     model.pt       parameters and buffers by name (torch pickle of a name -> tensor dict)
//     optimizer.pt   the optimizer's state by parameter name ("<param>/<kind>", as
//                    optim/param_state.h names the kinds), so that any layout reads it
//     state.pt       RNG states and other tensors of the trainer
//     meta.json      step, data position, config fingerprint, free-form trainer state
//     manifest.json  every file above with its size and content hash; written last
// built in a temporary directory and published with one rename, so a crash never leaves a
// half-written checkpoint under a real name; loading verifies the manifest first.
//
// Sharded checkpoints (strategy.sharding zero*): every rank writes
//     shard-<rank>-of-<world>.pt   its shards of the parameters and optimizer state, its RNG
// and model.pt holds what is not sharded (buffers, frozen parameters), optimizer.pt (only if
// any) the state of parameters kept whole; meta.json carries the layout of the shards
// (distributed/sharded_state.h). The manifest lists every shard. Any layout resumes under
// any other (distributed/checkpoint_reader.h).
#pragma once

#include <ATen/core/Tensor.h>

#include "frugal/io/named_tensors.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace frugal {

using NamedTensors = io::NamedTensors;

struct Checkpoint {
  int64_t step = 0;
  NamedTensors model;      // parameters and buffers
  NamedTensors optimizer;  // optimizer state by "<param>/<kind>"
  NamedTensors state;      // RNG states etc.
  std::string meta_json;   // a JSON object with the trainer's own fields
  // Sharded checkpoints: the ranks that wrote it, and the shards loaded (all of them, or the
  // one asked for).
  int shard_world = 0;
  std::vector<NamedTensors> shards;
};

// Writes <dir>/step_<step>/ atomically, then removes all but the newest keep_last
// checkpoints (keep_last <= 0 keeps all). Refuses to replace an existing checkpoint.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const Checkpoint& ckpt,
                                      int64_t keep_last);
// Reads and verifies one checkpoint directory; a missing, truncated or corrupt one is a
// frugal::Error naming the file. Sharded: `only_shard` loads that rank's shard alone (none
// when the checkpoint was written by fewer ranks).
Checkpoint load_checkpoint(const std::filesystem::path& checkpoint_dir,
                           std::optional<int> only_shard = std::nullopt);
// The same, without the model's and optimizer's tensors and the shards (step, state, meta and
// the shards' world): what a reader that takes tensors one at a time, and only the ranges it
// needs (io/checkpoint_files.h), reads first.
Checkpoint load_checkpoint_info(const std::filesystem::path& checkpoint_dir);

// Checks a checkpoint directory without loading its tensors: the manifest is whole and lists
// every file a checkpoint of its kind needs (every rank's shard of a sharded one), and each file
// it lists has the size and hash it says. A frugal::Error naming the first file that fails.
void verify_checkpoint(const std::filesystem::path& checkpoint_dir);
// A share of verify_checkpoint's work, for the ranks of a job to split it
// (distributed/checkpoint_verify.h): every part checks that every file is there with its size;
// of the bytes' hashes, part `part` of `parts` checks shard `part` whole when the checkpoint
// was sharded by `parts` ranks (the shard that rank resumes from under the same layout), its
// slice of the blocks of every other indexed file (model.pt, optimizer.pt, the shards of
// another world size), and whole every parts-th of the remaining files (meta.json, index
// files). Together the parts check everything verify_checkpoint checks, each reading about
// 1/parts of the bytes. Returns the bytes this part read (index files included); a
// frugal::Error names the first bad file.
int64_t verify_checkpoint_part(const std::filesystem::path& checkpoint_dir, int part, int parts);
// The newest checkpoint under dir that `verify` (by default verify_checkpoint) accepts, if
// any; the newer ones it rejected go to `rejected`, newest first, each with the reason (which
// names the bad file). `verify` throws a frugal::Error for a bad checkpoint.
using RejectedCheckpoints = std::vector<std::pair<std::filesystem::path, std::string>>;
using CheckpointVerifier = std::function<void(const std::filesystem::path& checkpoint_dir)>;
std::optional<std::filesystem::path> newest_valid_checkpoint(
    const std::filesystem::path& dir, RejectedCheckpoints* rejected = nullptr,
    const CheckpointVerifier& verify = {});

// Writing a checkpoint from a job: these calls in this order, each followed by a barrier of
// the job. Rank 0 prepares the temporary directory (refusing an existing checkpoint of that
// step, clearing what a crashed attempt left); every rank with a shard writes it into it;
// rank 0 writes `ckpt` (model = the tensors saved whole, optimizer, state, meta), hashes every
// file into the manifest, publishes the directory with one rename and prunes to keep_last.
// world = 0: nothing is sharded and no shard was written.
void begin_sharded_checkpoint(const std::filesystem::path& dir, int64_t step);
void write_checkpoint_shard(const std::filesystem::path& dir, int64_t step, int rank, int world,
                            const NamedTensors& shard);
std::filesystem::path publish_sharded_checkpoint(const std::filesystem::path& dir,
                                                 const Checkpoint& ckpt, int world,
                                                 int64_t keep_last);
std::string shard_file_name(int rank, int world);
// Where the checkpoint of `step` goes under dir (<dir>/step_00000120).
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);
// The newest complete checkpoint under dir (by step: one with a manifest, unverified), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
// All complete checkpoints under dir (with a manifest, unverified), oldest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

}  // namespace frugal
