// Learning-rate schedules as pure functions of the optimizer step (0-based: the rate used by
// step s). Linear warmup over warmup_steps (lr * (s + 1) / warmup), then:
//   constant  base
//   cosine    min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,  p = (s - warmup) / decay_steps
//   linear    base + (min_lr - base) * p
//   step      base * gamma ^ floor(s / step_size)
// p is clamped to [0, 1]; decay_steps 0 means until max_steps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

// A schedule after warmup: the rate of step `step` from the base rate and the decay's progress
// p in [0, 1] (warmup is the same for every schedule and not its concern).
using ScheduleFn =
    std::function<double(const ScheduleConfig& cfg, double base_lr, double p, int64_t step)>;
// Makes `name` a valid schedule.type (in YAML and for LrSchedule); a name already taken
// (built in or registered) is a frugal::Error.
void register_schedule(const std::string& name, ScheduleFn fn);
std::vector<std::string> schedule_names();

class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t max_steps);
  double lr_at(int64_t step) const;

 private:
  ScheduleConfig cfg_;
  double base_lr_;
  int64_t decay_steps_;
  ScheduleFn after_warmup_;
};

}  // namespace frugal
