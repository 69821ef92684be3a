// The bookkeeping of one backward that DDP and ZeRO keep alike: which parameters' gradients
// have arrived (a hook after each accumulation), whether this micro-step reduces at all, the
// next group to launch (groups are launched in one order on every rank), and the groups
// started but not yet handed to optimizer offload's pipeline. Each strategy's state derives
// from it; the hooks hold that state weakly.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "final_gradients.h"
#include "frugal/distributed/communicator.h"
#include "frugal/strategy/gradient_hooks.h"
#include "frugal/util/error.h"

namespace frugal::dist {

struct GradientReduction {
  std::shared_ptr<Communicator> comm;
  std::recursive_mutex mutex;  // autograd's threads, the step's thread
  bool sync = true;            // this micro-step's gradients are reduced
  std::vector<char> reported;  // per hooked parameter, this backward
  GradientHooks hooks;         // calls the strategy after each parameter's accumulation
  size_t next_launch = 0;      // the next group to launch, in launch order
  FinalGradients final_gradients;

  // Parameter `index`'s gradient has arrived; a second arrival in one backward is an error,
  // `where` says which strategy and parameter or group.
  void mark_reported(size_t index, const std::string& where) {
    if (reported[index]) {
      throw Error(
          fmt::format("sharding {} received its gradient twice in one backward (used "
                      "both inside and outside a checkpointed unit, or in two units?)",
                      where));
    }
    reported[index] = 1;
  }
  void reset_backward() {
    std::fill(reported.begin(), reported.end(), 0);
    next_launch = 0;
  }
};

}  // namespace frugal::dist
