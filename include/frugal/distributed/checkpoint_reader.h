// The resharding reader: a checkpoint directory of any layout (whole, or sharded by any number
// of ranks under zero1/2/3) read as a SavedState (strategy/state_dict.h), so that any layout
// resumes under any other. It reads the manifest, meta, whole tensors and this rank's shard
// at once, verified against their hashes; every other rank's shard only when whole values are
// asked for.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "frugal/distributed/sharded_state.h"
#include "frugal/io/checkpoint.h"
#include "frugal/strategy/state_dict.h"

namespace frugal::dist {

class CheckpointReader final : public SavedState {
 public:
  // `rank`: this process's rank, whose shard (if it wrote one) is read first.
  CheckpointReader(std::filesystem::path dir, int rank);

  // What the checkpoint holds besides the training state (step, meta.json).
  const Checkpoint& checkpoint() const { return ckpt_; }
  // The random generators' states to resume this rank with: its own shard's (sharded), or
  // the whole checkpoint's (written by rank 0).
  const io::NamedTensors& rng_state() const;

  std::string what() const override { return dir_.string(); }
  bool has_shards() const override { return layout_.has_value(); }
  const io::NamedTensors& model() override { return ckpt_.model; }
  std::map<std::string, at::Tensor> whole(const std::string& kind) override;
  std::vector<std::string> optimizer_kinds() override;
  const io::NamedTensors* own_shard(const std::string& layout_json) override;
  const io::NamedTensors& state() override { return ckpt_.state; }

 private:
  void read_every_shard();

  std::filesystem::path dir_;
  int rank_;
  Checkpoint ckpt_;                    // shards: this rank's only, until read_every_shard
  bool every_shard_ = false;
  std::optional<ShardLayout> layout_;  // sharded checkpoints
  std::string layout_json_;            // layout_, written as layout_to_json does
};

}  // namespace frugal::dist
