// Checkpoints that any layout resumes, as PyTorch's distributed checkpoints: a sharding
// strategy says what it holds of the training state (StateDict) and takes it back from a
// SavedState, which answers in the terms of the model, by parameter name, whatever layout
// wrote it (none, ddp, zero1/2/3, at any world size). distributed/checkpoint_reader.h reads a
// checkpoint directory as one.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frugal/io/named_tensors.h"

namespace frugal {

// What one rank holds of the training state, ready to write.
struct StateDict {
  // Whole tensors, alike on every rank (rank 0 writes them): the model's parameters and
  // buffers by name (those not in shards), and their optimizer state as "<param>/<kind>"
  // (optim/param_state.h's kinds: exp_avg, exp_avg_sq, step, momentum_buffer, ...).
  io::NamedTensors model;
  io::NamedTensors optimizer;
  // This rank's own tensors (zero1/2/3: its shards, "<flat>/<kind>"); empty for none and ddp.
  // They are the live tensors, on their device, as torch's state_dict() returns them: write
  // them (io/checkpoint.h copies one at a time to the host) or clone them before the next step.
  io::NamedTensors shard;
  // The shards' layout as JSON (distributed/sharded_state.h); empty without shards.
  std::string layout_json;
  // The rest of the step's state (the loss scaler's), alike on every rank.
  io::NamedTensors state;
};

// One rank's shard as it was saved ("<flat>/<kind>" -> its slice), read one entry at a time.
class SavedShard {
 public:
  virtual ~SavedShard() = default;
  virtual const std::vector<std::string>& keys() const = 0;
  virtual at::Tensor read(const std::string& key) = 0;
};

// A range of a saved value to read: elements [begin, begin + count) of `name`'s value of
// `kind`, copied into `into` (`count` elements, any shape, on any device), or when `into` is
// undefined, set there as read (flat, on the CPU, in the saved dtype).
struct SavedRange {
  std::string kind, name;
  int64_t begin = 0, count = 0;
  at::Tensor into;
};

// A saved training state, read by parameter name.
class SavedState {
 public:
  virtual ~SavedState() = default;
  // The checkpoint, for errors.
  virtual std::string what() const = 0;
  // Saved in shards (zero1/2/3) rather than whole.
  virtual bool has_shards() const = 0;
  // The tensors saved whole: every parameter and buffer of a whole checkpoint; buffers and
  // parameters kept out of shards of a sharded one.
  virtual const io::NamedTensors& model() = 0;
  // The tensors saved whole except those named in `skip`: what a rank that cut the skipped
  // parameters from their saved values (read_range) still needs, without reading the rest.
  // By default model() less `skip`.
  virtual io::NamedTensors model_except(const std::set<std::string>& skip);
  // Whole values by parameter name of one kind: "param" (every parameter and buffer, from
  // the whole tensors and the shards) or an optimizer state kind. Reads every shard.
  virtual std::map<std::string, at::Tensor> whole(const std::string& kind) = 0;
  // Parts of one value, for a rank that keeps only a slice of it: the number of elements
  // saved of `name`'s value of `kind` (-1 when none is), and elements [begin, begin + count)
  // of it, flattened, on the CPU. A checkpoint reads only the byte ranges that hold them
  // (io/checkpoint_files.h). By default both come from whole(kind).
  virtual int64_t saved_numel(const std::string& kind, const std::string& name);
  virtual at::Tensor read_range(const std::string& kind, const std::string& name, int64_t begin,
                                int64_t count);
  // Reads every range into its tensor, in the order that suits where they are stored (a
  // checkpoint: the order of its files' bytes, so that each block is read once). By default
  // one after the other through read_range.
  virtual void read_ranges(std::vector<SavedRange>& ranges);
  // The optimizer state kinds saved.
  virtual std::vector<std::string> optimizer_kinds() = 0;
  // This rank's shard as it was saved, when it was saved under exactly `layout_json` (same
  // world size, units and parameters); null otherwise.
  virtual SavedShard* own_shard(const std::string& layout_json) = 0;
  // The rest of the step's state (StateDict::state).
  virtual const io::NamedTensors& state() = 0;

 protected:
  // One range read through read_range, into its tensor (read_ranges' one step).
  void read_range_into(SavedRange& range);

 private:
  // The default saved_numel / read_range: whole(kind), kept for the next call of that kind.
  const std::map<std::string, at::Tensor>& whole_cached(const std::string& kind);
  std::string cached_kind_;
  std::map<std::string, at::Tensor> cached_;
};

// A frugal::Error naming the checkpoint when the saved optimizer state kind cannot be cut
// for a layout other than the one that wrote it (optim/param_state.h's
// reshardable_state_kind: 8-bit codes, factored moments).
void refuse_unreshardable(SavedState& saved, const std::string& kind);

// Maps a tensor the sharding holds to the one the optimizer keeps its state under (optimizer
// offload's host master); identity when null.
using StateHolder = std::function<at::Tensor(const at::Tensor&)>;

}  // namespace frugal
