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

#include "frugal/distributed/communicator.h"
#include "frugal/strategy/sharding.h"

namespace frugal::dist {

class DataParallel final : public Sharding {
 public:
  DataParallel(std::shared_ptr<Communicator> comm, double bucket_mb = 25.0);
  ~DataParallel() override;

  std::string name() const override { return "ddp"; }
  void setup(const ShardingSetup& setup) override;
  void begin_micro_step(int64_t index, int64_t count) override;
  void finish_gradients() override;
  // A bucket's parameters are final once its all-reduce is done: waited for when the next
  // bucket's starts (or at the end of backward), and then handed to `ready`.
  bool notify_final_gradients(std::function<void(const std::vector<at::Tensor>&)> ready) override;
  double sum_across_ranks(double v) override;
  void zero_grad(torch::optim::Optimizer& optimizer) override;
  bool is_main() const override { return comm_->is_main(); }
  // (every trained parameter's gradient is a view into a bucket)
  bool owns_gradient_buffers() const override { return true; }
  bool reduces_gradients() const override { return true; }

  int64_t bucket_count() const;
  // How many bucket all-reduces were launched from inside backward (the rest, if any, at
  // finish_gradients): tests check that communication overlaps backward.
  int64_t launched_during_backward() const;

 private:
  struct State;
  std::shared_ptr<Communicator> comm_;
  double bucket_mb_;
  std::shared_ptr<State> state_;  // shared: the autograd hooks hold it weakly
};

}  // namespace frugal::dist
