// Telling optimizer offload's pipeline (Sharding::notify_final_gradients) which parameters'
// gradients are final, group by group (DDP's buckets, zero's units), in the order their
// reductions start: when a group's reduction starts, the groups started before it have had
// its backward to finish, so they are waited for and handed over; at the end of backward,
// the rest. Shared by DataParallel and ZeroSharding; callers hold their lock.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>
#include <vector>

namespace frugal::dist {

class FinalGradients {
 public:
  using Ready = std::function<void(const std::vector<at::Tensor>&)>;
  // `finish(g)` below waits for group g's reduction and returns the parameters it made final
  // (a callable taken by reference: nothing is allocated when the pipeline is not armed).

  void arm(Ready ready) {
    ready_ = std::move(ready);
    pending_.clear();
  }
  // Group `g`'s reduction has started.
  template <class Finish>
  void started(size_t g, const Finish& finish) {
    if (!ready_) return;
    hand_over(finish);
    pending_.push_back(g);
  }
  // End of backward: the groups not handed over yet; then disarmed.
  template <class Finish>
  void finish_all(const Finish& finish) {
    if (!ready_) return;
    hand_over(finish);
    ready_ = nullptr;
  }

 private:
  template <class Finish>
  void hand_over(const Finish& finish) {
    std::vector<at::Tensor> params;
    for (size_t g : pending_) {
      for (auto& p : finish(g)) params.push_back(std::move(p));
    }
    pending_.clear();
    if (!params.empty()) ready_(params);
  }

  Ready ready_;
  std::vector<size_t> pending_;  // started, not handed over yet, in order
};

}  // namespace frugal::dist
