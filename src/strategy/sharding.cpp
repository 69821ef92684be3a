#include "frugal/strategy/sharding.h"

#include <mutex>

#include "frugal/optim/clip.h"
#include "frugal/strategy/gradient_hooks.h"
#include "frugal/util/error.h"

namespace frugal {

struct Sharding::Watch {
  std::vector<at::Tensor> params;  // the optimizer's, at setup
  GradientHooks hooks;             // installed by the first notify_final_gradients
  bool hooked = false;
  std::mutex mutex;
  std::function<void(const std::vector<at::Tensor>&)> ready;  // armed while set
};

void Sharding::setup(const ShardingSetup& setup) {
  watch_ = std::make_shared<Watch>();
  for (const auto& group : setup.optimizer.param_groups()) {
    watch_->params.insert(watch_->params.end(), group.params().begin(), group.params().end());
  }
}

bool Sharding::notify_final_gradients(std::function<void(const std::vector<at::Tensor>&)> ready) {
  if (!watch_ || watch_->params.empty()) return false;
  Watch& w = *watch_;
  if (!w.hooked) {
    // Installed on first use only: runs that never overlap the optimizer pay no hook calls.
    std::weak_ptr<Watch> weak = watch_;
    w.hooks = GradientHooks(w.params, [weak](size_t i) {
      auto watch = weak.lock();
      if (!watch) return;
      std::function<void(const std::vector<at::Tensor>&)> ready;
      {
        std::lock_guard<std::mutex> lock(watch->mutex);
        ready = watch->ready;
      }
      if (ready) ready({watch->params[i]});
    });
    w.hooked = true;
  }
  std::lock_guard<std::mutex> lock(w.mutex);
  w.ready = std::move(ready);
  return true;
}

void Sharding::finish_gradients() {
  if (!watch_) return;
  std::lock_guard<std::mutex> lock(watch_->mutex);
  watch_->ready = nullptr;
}

void Sharding::set_offload_params(bool pin_memory) {
  (void)pin_memory;
  throw Error("strategy.offload.params: needs strategy.sharding.mode zero3 (this run's is " +
              name() + ")");
}

at::Tensor Sharding::grad_norm_squared(const std::vector<at::Tensor>& params) {
  return frugal::grad_norm_squared(params);
}

}  // namespace frugal
