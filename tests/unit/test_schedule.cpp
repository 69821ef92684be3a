#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "frugal/optim/schedule.h"
#include "frugal/util/error.h"

using frugal::LrSchedule;
using frugal::ScheduleConfig;

TEST_CASE("warmup is linear from lr/warmup to lr", "[unit][optim]") {
  ScheduleConfig c;
  c.type = "constant";
  c.warmup_steps = 4;
  LrSchedule s(c, 1.0, 100);
  CHECK(s.lr_at(0) == 0.25);
  CHECK(s.lr_at(3) == 1.0);
  CHECK(s.lr_at(50) == 1.0);
}

TEST_CASE("cosine decays from lr to min_lr over decay_steps", "[unit][optim]") {
  ScheduleConfig c;
  c.type = "cosine";
  c.warmup_steps = 10;
  c.min_lr = 0.1;
  LrSchedule s(c, 1.0, 110);  // decay over the 100 steps after warmup
  CHECK(s.lr_at(10) == Approx(1.0));
  CHECK(s.lr_at(60) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.5))));
  CHECK(s.lr_at(110) == Approx(0.1));
  CHECK(s.lr_at(500) == Approx(0.1));
}

TEST_CASE("linear and step schedules", "[unit][optim]") {
  ScheduleConfig lin;
  lin.type = "linear";
  lin.min_lr = 0.0;
  lin.decay_steps = 10;
  LrSchedule l(lin, 2.0, 1000);
  CHECK(l.lr_at(5) == Approx(1.0));
  CHECK(l.lr_at(10) == Approx(0.0));

  ScheduleConfig st;
  st.type = "step";
  st.step_size = 3;
  st.gamma = 0.5;
  LrSchedule s(st, 1.0, 100);
  CHECK(s.lr_at(2) == 1.0);
  CHECK(s.lr_at(3) == 0.5);
  CHECK(s.lr_at(7) == 0.25);
}

TEST_CASE("unknown schedule is a user error", "[unit][optim][bad_input]") {
  ScheduleConfig c;
  c.type = "exponential";
  CHECK_THROWS_AS(LrSchedule(c, 1.0, 10), frugal::Error);
}
