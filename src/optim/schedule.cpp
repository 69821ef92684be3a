#include "frugal/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "frugal/config/named_registry.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

NamedRegistry<ScheduleFn>& schedules() {
  static NamedRegistry<ScheduleFn> r(
      "schedule.type", "schedule",
      {
          {"constant", [](const ScheduleConfig&, double base, double, int64_t) { return base; }},
          {"cosine",
           [](const ScheduleConfig& c, double base, double p, int64_t) {
             return c.min_lr + (base - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
           }},
          {"linear", [](const ScheduleConfig& c, double base, double p,
                        int64_t) { return base + (c.min_lr - base) * p; }},
          {"step",
           [](const ScheduleConfig& c, double base, double, int64_t step) {
             return base * std::pow(c.gamma,
                                    static_cast<double>(step / std::max<int64_t>(1, c.step_size)));
           }},
      },
      /*validated=*/true);
  return r;
}

// Built when the library loads, so that config validation knows the built-in names.
[[maybe_unused]] const bool kScheduleNamesAtLoad = (schedules(), true);

}  // namespace

void register_schedule(const std::string& name, ScheduleFn fn) {
  if (!fn) throw std::invalid_argument("register_schedule: empty function");
  schedules().add(name, std::move(fn));
}

std::vector<std::string> schedule_names() { return schedules().names(); }

LrSchedule::LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t max_steps)
    : cfg_(cfg), base_lr_(base_lr), after_warmup_(schedules().get(cfg.type)) {
  decay_steps_ =
      cfg.decay_steps > 0 ? cfg.decay_steps : std::max<int64_t>(1, max_steps - cfg.warmup_steps);
}

double LrSchedule::lr_at(int64_t step) const {
  if (step < cfg_.warmup_steps) {
    return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(cfg_.warmup_steps);
  }
  const double p = std::clamp(
      static_cast<double>(step - cfg_.warmup_steps) / static_cast<double>(decay_steps_), 0.0, 1.0);
  return after_warmup_(cfg_, base_lr_, p, step);
}

}  // namespace frugal
