// The report page's style sheet and its one inline script (no file, nothing fetched): the
// smoothing control (TensorBoard's debiased exponential moving average, applied to every
// chart marked `smooth`) and the values under the pointer. The script reads the numbers the
// charts carry in data attributes (report_chart.h); the page reads fine without it.
#pragma once

namespace frugal::report {

extern const char* const kPageStyle;
extern const char* const kPageScript;

}  // namespace frugal::report
