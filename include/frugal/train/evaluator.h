// The validation loss: the mean loss per target over up to train.eval_batches batches of the
// validation split, with whole parameters (zero3 gathers them: every rank calls it).
#pragma once

#include <memory>

#include "frugal/config/config.h"
#include "frugal/data/dataset.h"
#include "frugal/models/model.h"
#include "frugal/strategy/sharding.h"

namespace frugal {

class Evaluator {
 public:
  Evaluator(const Config& cfg, std::shared_ptr<Dataset> val_data, Model& model,
            Sharding& sharding, c10::Device device);
  // NaN when the split has less than one micro-batch.
  double evaluate();

 private:
  const Config& cfg_;
  std::shared_ptr<Dataset> data_;
  Model& model_;
  Sharding& sharding_;
  c10::Device device_;
};

}  // namespace frugal
