// The data set interface every source implements (token shards, text, IDX, synthetic) and the
// factory that builds one from the `data:` config section. A data set is a fixed-size,
// random-access collection of samples; the DataLoader decides the order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/data/batch.h"

namespace frugal {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Stacks samples `indices` (each in [0, size())) into one Batch, in the given order.
  // Must be safe to call from several threads at once (loader workers do).
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;
};

enum class Split { train, val };

// Samples [first, first + count) of `base`, renumbered from 0: how train/val splits are made.
std::shared_ptr<Dataset> slice(std::shared_ptr<const Dataset> base, int64_t first, int64_t count);

// The data set for one split. Validation data comes from data.val_path when set, else from
// the last data.val_fraction of the samples (train gets the rest; val_fraction 0 gives an
// empty val set). `seed` (run.seed) only drives synthetic data. data.seq_len 0 means
// model.block_size. User mistakes (missing file, corrupt shard, token >= vocab) throw
// frugal::Error naming the config key and the file.
std::shared_ptr<Dataset> make_dataset(const DataConfig& data, const ModelConfig& model, Split split,
                                      uint64_t seed);

// data.seq_len, or model.block_size when it is 0.
int64_t resolved_seq_len(const DataConfig& data, const ModelConfig& model);

}  // namespace frugal
