// What the distributed sharding strategies (DataParallel, ZeroSharding) share: the
// communicator, sums across ranks, gradients that live in buffers the strategy owns, and the
// final-gradient notification that optimizer offload's pipeline overlaps backward with.
#pragma once

#include <memory>

#include "frugal/distributed/communicator.h"
#include "frugal/strategy/sharding.h"

namespace frugal::dist {

struct GradientReduction;  // the per-backward bookkeeping (src/distributed/gradient_reduction.h)

class RankSharding : public Sharding {
 public:
  ~RankSharding() override;
  double sum_across_ranks(double v) override;
  // A group of gradients (a DDP bucket, a ZeRO unit) is final once its reduction is done:
  // waited for when the next group's starts (or at the end of backward), then handed over.
  // False on micro-steps that reduce nothing (accumulation).
  bool notify_final_gradients(std::function<void(const std::vector<at::Tensor>&)> ready) override;
  bool owns_gradient_buffers() const override { return true; }
  const Communicator& communicator() const { return *comm_; }

 protected:
  // `who` names the strategy in the error for a missing communicator.
  RankSharding(std::shared_ptr<Communicator> comm, const char* who);
  virtual GradientReduction& reduction() = 0;

  std::shared_ptr<Communicator> comm_;
};

}  // namespace frugal::dist
