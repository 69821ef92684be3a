// The resharding reader: a checkpoint directory of any layout (whole, or sharded by any number
// of ranks under zero1/2/3) read as a SavedState (strategy/state_dict.h), so that any layout
// resumes under any other. At once it reads the manifest, meta and state.pt; every tensor of
// model.pt, optimizer.pt and the shards only when asked for, and then only the byte ranges
// that hold what is asked (io/checkpoint_files.h): under another layout each rank reads the
// slices it keeps (of the shards, or of a whole checkpoint's files), under the same one its own
// shard, one entry at a time.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "frugal/distributed/sharded_state.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/checkpoint_files.h"
#include "frugal/io/pending_tensors.h"
#include "frugal/strategy/state_dict.h"

namespace frugal::dist {

class CheckpointReader final : public SavedState {
 public:
  // `rank`: this process's rank, whose shard (if it wrote one) is its own.
  CheckpointReader(std::filesystem::path dir, int rank);
  ~CheckpointReader() override;

  // What the checkpoint holds besides the training state (step, meta.json, state.pt); no
  // model, optimizer or shard tensors.
  const Checkpoint& checkpoint() const { return ckpt_; }
  // The random generators' states to resume this rank with: its own shard's (sharded), or
  // the whole checkpoint's (written by rank 0).
  const io::NamedTensors& rng_state();
  // Bytes read from the checkpoint's files so far (the whole tensors included), and the bytes
  // of all its files.
  int64_t bytes_read() const;
  int64_t total_bytes() const { return files_.total_bytes(); }

  // The model's weights, each read when asked (io/pending_tensors.h): the layout's
  // parameters in its order, put together from the shards that hold them, then what was
  // saved whole (buffers, frozen parameters); never the optimizer state. A whole checkpoint:
  // model.pt's tensors.
  io::PendingTensors weights();

  std::string what() const override { return dir_.string(); }
  bool has_shards() const override { return layout_.has_value(); }
  const io::NamedTensors& model() override;
  io::NamedTensors model_except(const std::set<std::string>& skip) override;
  std::map<std::string, at::Tensor> whole(const std::string& kind) override;
  int64_t saved_numel(const std::string& kind, const std::string& name) override;
  at::Tensor read_range(const std::string& kind, const std::string& name, int64_t begin,
                        int64_t count) override;
  void read_ranges(std::vector<SavedRange>& ranges) override;
  std::vector<std::string> optimizer_kinds() override;
  SavedShard* own_shard(const std::string& layout_json) override;
  const io::NamedTensors& state() override { return ckpt_.state; }

 private:
  // Rank r's shard file, its entry `key` checked to hold the layout's shard of `flat`.
  io::CheckpointFile& shard(int r);
  void check_shard_entry(int r, const FlatLayout& flat, const std::string& key);
  // Where a value saved whole (outside the shards) lies: model.pt's `name` for "param",
  // optimizer.pt's "<name>/<kind>" otherwise; the file is null when it holds none.
  std::pair<io::CheckpointFile*, std::string> saved_whole(const std::string& kind,
                                                          const std::string& name);
  // A range, or its part in one file, and where it starts there: (file, byte), read_ranges'
  // order.
  using Position = std::pair<std::string, int64_t>;
  struct Piece {
    Position at;
    SavedRange range;
  };
  void add_pieces(SavedRange range, std::vector<Piece>& out);
  // The whole tensors of model.pt (none when the manifest lists none) and optimizer.pt.
  io::CheckpointFile* model_file();
  io::CheckpointFile* optimizer_file();

  std::filesystem::path dir_;
  int rank_;
  Checkpoint ckpt_;  // step, state, meta: tensors are read through files_
  int64_t info_bytes_ = 0;  // of the files ckpt_ was read from
  io::CheckpointFiles files_;
  std::optional<ShardLayout> layout_;  // sharded checkpoints
  std::string layout_json_;            // layout_, written as layout_to_json does
  // parameter name -> (flat buffer, index of the parameter in it), for sharded checkpoints
  std::map<std::string, std::pair<size_t, size_t>> where_;
  std::optional<io::NamedTensors> model_;  // model.pt whole, once model() asked for it
  std::unique_ptr<SavedShard> own_;
  std::optional<io::NamedTensors> rng_;
};

}  // namespace frugal::dist
