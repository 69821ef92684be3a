// The axes of `frugal report`'s charts: tick positions at nice values (1, 2 or 5 times a power
// of ten, on linear and logarithmic scales) and tick labels in a unit chosen for the data's
// size (bytes in KiB / MiB / GiB, seconds or milliseconds, tokens/s in k or M).
#pragma once

#include <string>
#include <vector>

namespace frugal::chart {

enum class Unit { none, steps, bytes, seconds, tokens_per_s };

// The smallest step of 1, 2 or 5 x 10^k that is >= `raw` (raw > 0).
double nice_step(double raw);

struct Ticks {
  double lo = 0, hi = 1;       // the axis' range (extended to ticks when asked)
  double step = 0;             // linear ticks' spacing; 0 on a log scale
  std::vector<double> values;  // ascending, inside [lo, hi]
};

// Ticks at multiples of a nice step, at most `max_ticks` of them over [lo, hi]. `extend`
// widens the range to the ticks just outside it (a y axis that starts and ends on a label).
// `integer` keeps the step >= 1 (steps).
Ticks linear_ticks(double lo, double hi, int max_ticks, bool extend, bool integer = false);

// A logarithmic axis over [lo, hi] (0 < lo < hi): ticks at 1, 2 and 5 x 10^k (only 10^k when
// those are too many); under a decade, linear_ticks' values, which read better there.
Ticks log_ticks(double lo, double hi, int max_ticks);

// How a unit's values are shown: value * factor, then the suffix ("MiB", "ms", "k tok/s").
struct Scale {
  double factor = 1;
  std::string suffix;
};
Scale display_scale(Unit unit, double max_abs);

// A tick label: as many decimals as the step needs (none for a step of 1 or more), then the
// suffix; step 0 (a log axis) formats with up to 3 significant digits; zero is "0".
std::string tick_label(double value, double step, const std::string& suffix);

}  // namespace frugal::chart
