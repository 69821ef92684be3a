#include "frugal/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "frugal/util/error.h"

namespace frugal {

LrSchedule::LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t max_steps)
    : cfg_(cfg), base_lr_(base_lr) {
  decay_steps_ = cfg.decay_steps > 0 ? cfg.decay_steps : std::max<int64_t>(1, max_steps - cfg.warmup_steps);
  if (cfg.type != "constant" && cfg.type != "cosine" && cfg.type != "linear" && cfg.type != "step") {
    throw Error("schedule.type: unknown schedule '" + cfg.type +
                "' (expected constant, cosine, linear or step)");
  }
}

double LrSchedule::lr_at(int64_t step) const {
  if (step < cfg_.warmup_steps) {
    return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(cfg_.warmup_steps);
  }
  const double p = std::clamp(
      static_cast<double>(step - cfg_.warmup_steps) / static_cast<double>(decay_steps_), 0.0, 1.0);
  if (cfg_.type == "cosine") {
    return cfg_.min_lr + (base_lr_ - cfg_.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  }
  if (cfg_.type == "linear") return base_lr_ + (cfg_.min_lr - base_lr_) * p;
  if (cfg_.type == "step") {
    return base_lr_ * std::pow(cfg_.gamma, static_cast<double>(step / std::max<int64_t>(1, cfg_.step_size)));
  }
  return base_lr_;
}

}  // namespace frugal
