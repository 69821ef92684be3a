#include "frugal/train/evaluator.h"

#include <torch/utils.h>

#include <limits>

#include "frugal/data/loader.h"

namespace frugal {

Evaluator::Evaluator(const Config& cfg, std::shared_ptr<Dataset> val_data, Model& model,
                     Sharding& sharding, c10::Device device)
    : cfg_(cfg), data_(std::move(val_data)), model_(model), sharding_(sharding), device_(device) {}

double Evaluator::evaluate() {
  if (!data_ || data_->size() < micro_batch_items(cfg_.data)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  LoaderOptions opts;
  opts.batch_size = micro_batch_items(cfg_.data);
  opts.shuffle = false;
  opts.num_workers = 0;
  DataLoader loader(data_, opts);
  const int64_t batches = std::min(cfg_.train.eval_batches, loader.batches_per_epoch());
  torch::NoGradGuard no_grad;
  FullParameters full(sharding_);  // zero3: whole parameters for the evaluation
  model_.eval();
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < batches; ++i) {
    Batch b = loader.next().to(device_, /*non_blocking=*/true);
    sum += model_.batch_loss_sum(b).item<double>();
    count += b.num_targets();
  }
  model_.train();
  return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace frugal
