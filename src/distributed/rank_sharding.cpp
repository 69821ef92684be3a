#include "frugal/distributed/rank_sharding.h"

#include <stdexcept>
#include <string>

#include "gradient_reduction.h"

namespace frugal::dist {

RankSharding::RankSharding(std::shared_ptr<Communicator> comm, const char* who)
    : comm_(std::move(comm)) {
  if (!comm_) throw std::invalid_argument(std::string(who) + " needs a communicator");
}

RankSharding::~RankSharding() = default;

double RankSharding::sum_across_ranks(double v) { return all_reduce_scalar(*comm_, v); }

bool RankSharding::notify_final_gradients(
    std::function<void(const std::vector<at::Tensor>&)> ready) {
  GradientReduction& r = reduction();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (!r.sync) return false;  // this micro-step reduces nothing
  r.final_gradients.arm(std::move(ready));
  return true;
}

}  // namespace frugal::dist
