// Data parallelism (strategy.sharding.mode: ddp): every rank holds the whole model and
// optimizer; gradients are summed over the ranks in buckets that start while backward is
// still running.
//
// - setup: parameters and buffers are broadcast from rank 0, so every rank starts equal.
// - Buckets: parameters in reverse registration order (roughly the order backward produces
//   their gradients), packed into flat buffers of about bucket_mb MiB. Each parameter's .grad
//   is a view into its bucket, so the reduction needs no copy in or out.
// - A post-hook on each parameter's gradient accumulator counts the bucket down; when it is
//   complete, the bucket's all-reduce is launched asynchronously (buckets are launched in
//   order, the same on every rank, as collectives must be). finish_gradients() waits.
// - On accumulation micro-steps before the last, the hooks do nothing: gradients accumulate
//   locally and the last micro-step's reduction carries them all.
// - The loss is divided by the targets of all ranks, so the all-reduce SUMS: the gradients
//   equal those of one process training on the whole global batch.
#pragma once

#include <memory>

#include "frugal/distributed/rank_sharding.h"

namespace frugal::dist {

class DataParallel final : public RankSharding {
 public:
  DataParallel(std::shared_ptr<Communicator> comm, double bucket_mb = 25.0);
  ~DataParallel() override;

  std::string name() const override { return "ddp"; }
  void setup(const ShardingSetup& setup) override;
  void begin_micro_step(int64_t index, int64_t count) override;
  void finish_gradients() override;
  void zero_grad(torch::optim::Optimizer& optimizer) override;

  int64_t bucket_count() const;
  // How many bucket all-reduces were launched from inside backward (the rest, if any, at
  // finish_gradients): tests check that communication overlaps backward.
  int64_t launched_during_backward() const;

 private:
  struct State;
  GradientReduction& reduction() override;
  double bucket_mb_;
  std::shared_ptr<State> state_;  // shared: the autograd hooks hold it weakly
};

}  // namespace frugal::dist
