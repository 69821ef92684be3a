#include "frugal/report/chart_axis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace frugal::chart {

double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    // The tolerance keeps 0.2 (0.19999...) from rounding up to 0.5.
    if (m * decade >= raw * (1 - 1e-9)) return m * decade;
  }
  return 10 * decade;
}

Ticks linear_ticks(double lo, double hi, int max_ticks, bool extend, bool integer) {
  Ticks t;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) hi = lo + 1;
  max_ticks = std::max(2, max_ticks);
  t.step = nice_step((hi - lo) / (max_ticks - 1));
  if (integer) t.step = std::max(1.0, t.step);
  // Ticks are k * step for integer k: computed from k, not accumulated, so 0.3 stays 0.3.
  auto first = static_cast<int64_t>(std::ceil(lo / t.step - 1e-9));
  auto last = static_cast<int64_t>(std::floor(hi / t.step + 1e-9));
  if (extend) {
    first = static_cast<int64_t>(std::floor(lo / t.step + 1e-9));
    last = static_cast<int64_t>(std::ceil(hi / t.step - 1e-9));
    t.lo = static_cast<double>(first) * t.step;
    t.hi = static_cast<double>(last) * t.step;
  } else {
    t.lo = lo;
    t.hi = hi;
  }
  for (int64_t k = first; k <= last; ++k) {
    double v = static_cast<double>(k) * t.step;
    if (std::abs(v) < t.step * 1e-9) v = 0;
    t.values.push_back(v);
  }
  return t;
}

Ticks log_ticks(double lo, double hi, int max_ticks) {
  if (hi < lo) std::swap(lo, hi);
  if (hi / lo < 10) {
    Ticks t = linear_ticks(lo, hi, max_ticks, false);
    std::erase_if(t.values, [](double v) { return v <= 0; });
    t.step = 0;
    t.lo = lo;
    t.hi = hi;
    return t;
  }
  Ticks t;
  t.lo = lo;
  t.hi = hi;
  const int k0 = static_cast<int>(std::floor(std::log10(lo)));
  const int k1 = static_cast<int>(std::ceil(std::log10(hi)));
  auto collect = [&](std::initializer_list<double> mantissas, int every) {
    std::vector<double> out;
    for (int k = k0; k <= k1; ++k) {
      if ((k - k0) % every != 0) continue;
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
    }
    return out;
  };
  t.values = collect({1, 2, 5}, 1);
  if (static_cast<int>(t.values.size()) > max_ticks) t.values = collect({1}, 1);
  for (int every = 2; static_cast<int>(t.values.size()) > max_ticks; ++every) {
    t.values = collect({1}, every);
  }
  return t;
}

Scale display_scale(Unit unit, double max_abs) {
  switch (unit) {
    case Unit::bytes: {
      if (max_abs >= 1024.0 * 1024 * 1024) return {1.0 / (1024.0 * 1024 * 1024), "GiB"};
      if (max_abs >= 1024.0 * 1024) return {1.0 / (1024.0 * 1024), "MiB"};
      if (max_abs >= 1024.0) return {1.0 / 1024, "KiB"};
      return {1, "B"};
    }
    case Unit::seconds:
      if (max_abs > 0 && max_abs < 1e-3) return {1e6, "µs"};
      if (max_abs > 0 && max_abs < 1) return {1e3, "ms"};
      return {1, "s"};
    case Unit::tokens_per_s:
      if (max_abs >= 1e6) return {1e-6, "M tok/s"};
      if (max_abs >= 1e3) return {1e-3, "k tok/s"};
      return {1, "tok/s"};
    case Unit::steps:
    case Unit::none:
      break;
  }
  return {1, ""};
}

std::string tick_label(double value, double step, const std::string& suffix) {
  std::string number;
  if (value == 0) {
    number = "0";  // "0 MiB", not "0.0 MiB"
  } else if (step > 0) {
    const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    number = fmt::format("{:.{}f}", value, decimals);
  } else {
    number = fmt::format("{:.3g}", value);
  }
  return suffix.empty() ? number : number + " " + suffix;
}

}  // namespace frugal::chart
