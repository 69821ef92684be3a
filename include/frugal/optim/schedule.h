// Learning-rate schedules as pure functions of the optimizer step (0-based: the rate used by
// step s). Linear warmup over warmup_steps (lr * (s + 1) / warmup), then:
//   constant  base
//   cosine    min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,  p = (s - warmup) / decay_steps
//   linear    base + (min_lr - base) * p
//   step      base * gamma ^ floor(s / step_size)
// p is clamped to [0, 1]; decay_steps 0 means until max_steps.
#pragma once

#include <cstdint>

#include "frugal/config/config.h"

namespace frugal {

class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t max_steps);
  double lr_at(int64_t step) const;

 private:
  ScheduleConfig cfg_;
  double base_lr_;
  int64_t decay_steps_;
};

}  // namespace frugal
