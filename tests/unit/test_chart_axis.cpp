// The report's axes: nice steps (1, 2, 5 x 10^k), linear ticks inside or extended to the
// range, logarithmic ticks, display units and tick labels.
#include <catch2/catch.hpp>

#include "frugal/report/chart_axis.h"

// Inside the namespace rather than `using namespace`: in a unity batch, frugal::Unit (the
// models') would make `Unit` ambiguous.
namespace frugal::chart {

namespace {
std::vector<double> approx_values(const Ticks& t) { return t.values; }
void same(const std::vector<double>& got, const std::vector<double>& want) {
  INFO("got " << Catch::Detail::stringify(got));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
}
}  // namespace

TEST_CASE("nice steps are 1, 2 or 5 times a power of ten", "[unit][report]") {
  CHECK(nice_step(1.0) == Approx(1));
  CHECK(nice_step(1.4) == Approx(2));
  CHECK(nice_step(2.0) == Approx(2));
  CHECK(nice_step(2.01) == Approx(5));
  CHECK(nice_step(0.2) == Approx(0.2));  // not 0.5 from 0.2's rounding
  CHECK(nice_step(0.375) == Approx(0.5));
  CHECK(nice_step(7) == Approx(10));
  CHECK(nice_step(101) == Approx(200));
  CHECK(nice_step(3e-5) == Approx(5e-5));
  CHECK(nice_step(0) == 1);  // degenerate input: a usable step
}

TEST_CASE("linear ticks fall on multiples of the nice step", "[unit][report]") {
  Ticks t = linear_ticks(0, 1, 6, false);
  CHECK(t.step == Approx(0.2));
  same(approx_values(t), {0, 0.2, 0.4, 0.6, 0.8, 1.0});

  t = linear_ticks(0, 7, 6, false);  // 7/5 = 1.4 -> 2
  same(t.values, {0, 2, 4, 6});
  CHECK(t.hi == 7);
  t = linear_ticks(0, 7, 6, true);  // extended to the next tick
  same(t.values, {0, 2, 4, 6, 8});
  CHECK(t.hi == Approx(8));

  t = linear_ticks(3.2, 4.7, 5, true);  // 1.5 / 4 = 0.375 -> 0.5
  CHECK(t.lo == Approx(3.0));
  CHECK(t.hi == Approx(5.0));
  same(t.values, {3, 3.5, 4, 4.5, 5});

  t = linear_ticks(1, 8, 9, false, /*integer=*/true);  // steps: never a fraction
  CHECK(t.step == 1);
  same(t.values, {1, 2, 3, 4, 5, 6, 7, 8});
  t = linear_ticks(0, 1000, 9, false, true);
  CHECK(t.step == Approx(200));
  CHECK(t.values.size() == 6);

  t = linear_ticks(-0.3, 0.3, 7, false);  // around zero: zero is exactly 0
  CHECK(t.step == Approx(0.1));
  CHECK(std::find(t.values.begin(), t.values.end(), 0.0) != t.values.end());
  for (int n : {2, 5, 8}) {
    for (double span : {0.013, 1.0, 77.0, 4096.0, 3.3e9}) {
      CHECK(linear_ticks(10, 10 + span, n, false).values.size() <= static_cast<size_t>(n));
    }
  }
}

TEST_CASE("log ticks: 1-2-5 per decade, decades only when crowded, linear under a decade",
          "[unit][report]") {
  same(log_ticks(0.9, 110, 12).values, {1, 2, 5, 10, 20, 50, 100});
  same(log_ticks(0.9, 110, 4).values, {1, 10, 100});
  same(log_ticks(1e-6, 1e2, 5).values, {1e-6, 1e-4, 1e-2, 1, 100});
  same(log_ticks(2.1, 5.6, 6).values, {3, 4, 5});  // a loss between 2 and 6
  CHECK(log_ticks(2.1, 5.6, 6).step == 0);
}

TEST_CASE("display units and tick labels", "[unit][report]") {
  CHECK(display_scale(Unit::bytes, 512).suffix == "B");
  CHECK(display_scale(Unit::bytes, 3 * 1024.0).suffix == "KiB");
  const Scale mib = display_scale(Unit::bytes, 300 * 1024.0 * 1024);
  CHECK(mib.suffix == "MiB");
  CHECK(mib.factor == Approx(1.0 / (1024 * 1024)));
  CHECK(display_scale(Unit::bytes, 5e9).suffix == "GiB");
  CHECK(display_scale(Unit::seconds, 0.25).suffix == "ms");
  CHECK(display_scale(Unit::seconds, 2).suffix == "s");
  CHECK(display_scale(Unit::tokens_per_s, 12000).suffix == "k tok/s");
  CHECK(display_scale(Unit::none, 1e9).factor == 1);

  CHECK(tick_label(100, 50, "MiB") == "100 MiB");
  CHECK(tick_label(1.5, 0.5, "MiB") == "1.5 MiB");
  CHECK(tick_label(0, 0.5, "MiB") == "0 MiB");
  CHECK(tick_label(0.4, 0.2, "") == "0.4");
  CHECK(tick_label(0.25, 0.05, "s") == "0.25 s");
  CHECK(tick_label(3e-4, 1e-4, "") == "0.0003");
  CHECK(tick_label(5, 0, "") == "5");  // log axis
  CHECK(tick_label(0.002, 0, "") == "0.002");
}

}  // namespace frugal::chart
