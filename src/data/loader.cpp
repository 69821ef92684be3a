#include "frugal/data/loader.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include "frugal/data/sampler.h"
#include "frugal/util/error.h"

namespace frugal {

int64_t micro_batch_items(const DataConfig& data) {
  const bool instruction = data.type == "chat" || data.type == "tokenized";
  return instruction && data.max_tokens_per_batch > 0 ? 1 : data.micro_batch_size;
}

LoaderOptions loader_options(const DataConfig& data, uint64_t seed, int rank, int world_size) {
  LoaderOptions o{micro_batch_items(data)};
  o.shuffle = data.shuffle;
  o.seed = seed;
  o.num_workers = data.num_workers;
  o.pin_memory = data.pin_memory;
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (!dataset_) throw Error("DataLoader: no data set");
  if (options_.batch_size < 1) {
    throw Error(fmt::format("data.micro_batch_size must be >= 1 (got {})", options_.batch_size));
  }
  if (options_.num_workers < 0) {
    throw Error(fmt::format("data.num_workers must be >= 0 (got {})", options_.num_workers));
  }
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw Error(fmt::format("DataLoader: rank {} outside world size {}", options_.rank,
                            options_.world_size));
  }
  batches_per_epoch_ = dataset_->size() / (options_.batch_size * options_.world_size);
  pin_ = options_.pin_memory && at::globalContext().hasCUDA();
  capacity_ = 2 * options_.num_workers;  // enough to hide one load per worker behind a step
}

DataLoader::~DataLoader() { stop_workers(); }

std::shared_ptr<const std::vector<int64_t>> DataLoader::order(int64_t epoch) const {
  std::lock_guard lock(order_mutex_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_order(dataset_->size(), options_.shuffle, options_.seed, epoch));
  // Workers only straddle an epoch boundary: older orders are done with.
  std::erase_if(orders_, [&](const auto& entry) { return entry.first < epoch - 1; });
  orders_.emplace(epoch, order);
  return order;
}

Batch DataLoader::load(int64_t step) const {
  const int64_t epoch = step / batches_per_epoch_;
  const int64_t batch = step % batches_per_epoch_;
  Batch out = dataset_->get(
      rank_batch(*order(epoch), batch, options_.batch_size, options_.rank, options_.world_size));
  if (pin_) {
    for (at::Tensor* t : {&out.x, &out.y, &out.attention_mask, &out.position_ids}) {
      if (t->defined()) *t = t->pin_memory();
    }
  }
  return out;
}

Batch DataLoader::next() {
  if (batches_per_epoch_ == 0) {
    throw Error(options_.world_size > 1
                    ? fmt::format("data: {} samples are fewer than one global batch of {} = {} per "
                                  "rank x {} ranks",
                                  dataset_->size(), options_.batch_size * options_.world_size,
                                  options_.batch_size, options_.world_size)
                    : fmt::format("data: {} samples are fewer than one batch of {}",
                                  dataset_->size(), options_.batch_size));
  }
  if (options_.num_workers == 0) {
    Batch batch = load(next_);
    std::lock_guard lock(mutex_);
    ++next_;
    return batch;
  }
  if (workers_.empty()) start_workers();
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return done_.count(next_) > 0; });
  auto slot = done_.find(next_);
  if (slot->second.error) std::rethrow_exception(slot->second.error);  // stays: never skipped
  Batch batch = std::move(slot->second.batch);
  done_.erase(slot);
  ++next_;
  room_.notify_all();
  return batch;
}

void DataLoader::work() {
  for (;;) {
    int64_t step;
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [&] { return stopping_ || claimed_ < next_ + capacity_; });
      if (stopping_) return;
      step = claimed_++;
    }
    Slot slot;
    try {
      slot.batch = load(step);
    } catch (...) {
      slot.error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    done_.emplace(step, std::move(slot));
    ready_.notify_all();
  }
}

void DataLoader::start_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = false;
    claimed_ = next_;
    done_.clear();
  }
  for (int64_t i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { work(); });
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  room_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  std::lock_guard lock(mutex_);
  done_.clear();
}

LoaderPosition DataLoader::position() const {
  std::lock_guard lock(mutex_);
  if (batches_per_epoch_ == 0) return {0, next_};
  return {next_ / batches_per_epoch_, next_ % batches_per_epoch_};
}

void DataLoader::set_position(LoaderPosition position) {
  if (position.epoch < 0 || position.batch < 0) {
    throw Error(fmt::format("DataLoader: invalid position (epoch {}, batch {})", position.epoch,
                            position.batch));
  }
  stop_workers();  // prefetched batches belong to the old position; restarted by next()
  std::lock_guard lock(mutex_);
  next_ = position.epoch * batches_per_epoch_ + position.batch;
}

}  // namespace frugal
