#include "frugal/strategy/sharding.h"

#include "frugal/optim/clip.h"

namespace frugal {

at::Tensor Sharding::grad_norm_squared(const std::vector<at::Tensor>& params) {
  return frugal::grad_norm_squared(params);
}

}  // namespace frugal
