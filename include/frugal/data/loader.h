// Batches from a Dataset in a reproducible order (see sampler.h), prefetched by background
// threads. The stream is infinite: after the last full batch of an epoch (an incomplete final
// batch is dropped) it continues with the next epoch's order. position()/set_position() give
// exact resume: a loader set to a saved position returns the same batches the original would
// have, whatever num_workers either one uses.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/data/batch.h"
#include "frugal/data/dataset.h"

namespace frugal {

struct LoaderOptions {
  int64_t batch_size;  // per rank
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t num_workers = 1;  // background threads; 0 = load in the caller's thread
  bool pin_memory = false;  // page-locked batches for faster copies; ignored without CUDA
  int rank = 0;
  int world_size = 1;
};

// The data set items a micro-batch takes: data.micro_batch_size samples, or one token-capped
// batch under data.max_tokens_per_batch (chat and tokenized data, whose items are then whole
// batches).
int64_t micro_batch_items(const DataConfig& data);

// micro_batch_items, shuffle, num_workers and pin_memory, with the run's seed and rank.
LoaderOptions loader_options(const DataConfig& data, uint64_t seed, int rank = 0,
                             int world_size = 1);

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // index within the epoch of the NEXT batch next() returns
};

class DataLoader {
 public:
  // Throws frugal::Error for invalid options (batch_size < 1, rank outside [0, world_size)).
  DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options);
  ~DataLoader();  // stops and joins the workers, even those waiting for room to prefetch
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch, in order. Throws frugal::Error when the data set holds less than one
  // global batch (batch_size x world_size samples), and rethrows an exception a worker hit
  // while loading this batch (again on every call: a failed batch is never skipped).
  Batch next();
  LoaderPosition position() const;
  void set_position(LoaderPosition position);  // discards prefetched batches, restarts there
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  Batch load(int64_t step) const;  // step = epoch * batches_per_epoch + batch
  std::shared_ptr<const std::vector<int64_t>> order(int64_t epoch) const;
  void start_workers();
  void stop_workers();
  void work();

  std::shared_ptr<Dataset> dataset_;
  LoaderOptions options_;
  int64_t batches_per_epoch_;
  bool pin_;
  int64_t capacity_;  // batches prefetched ahead of the consumer

  mutable std::mutex mutex_;       // guards everything below
  std::condition_variable room_;   // workers wait for room to prefetch (or stop)
  std::condition_variable ready_;  // next() waits for its batch
  int64_t next_ = 0;               // step of the batch next() returns
  int64_t claimed_ = 0;            // next step a worker will load
  std::map<int64_t, Slot> done_;   // loaded steps not yet returned
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // started at the first next(), not in the constructor

  mutable std::mutex order_mutex_;  // guards orders_ (epoch -> permutation)
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;
};

}  // namespace frugal
