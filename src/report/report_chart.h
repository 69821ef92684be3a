// One chart of `frugal report` as inline SVG: axes with nice ticks and units, grid lines,
// lines (solid / dashed, optional point markers) or stacked areas, and rows of time ranges
// under the plot (the memory timeline's phases). The raw values ride along as data
// attributes so that the page's script (report_page.cpp) can smooth lines and show values
// under the pointer without a second source of numbers.
#pragma once

#include <string>
#include <vector>

#include "frugal/report/chart_axis.h"

namespace frugal::report {

struct Line {
  std::string label;  // in the hover box: "run-a · train"
  std::string color;
  bool dashed = false;
  bool markers = false;  // sparse points (validation loss): a dot at each, no smoothing
  std::vector<double> x, y;
};

struct Band {
  std::string name;  // its row and colour
  double start = 0, end = 0;
};

struct LegendEntry {
  std::string text;
  std::string color;
  bool dashed = false;
};

struct ChartSpec {
  std::string title;
  chart::Unit x_unit = chart::Unit::steps;
  chart::Unit y_unit = chart::Unit::none;
  bool log_y = false;        // a log scale for y (positive values only)
  bool log_toggle = false;   // also draw the linear version; a checkbox picks one
  bool smooth = true;        // the page's smoothing control applies to the lines
  bool stacked = false;      // lines are stacked areas over their common x values
  bool y_from_zero = false;  // the y range includes 0 (memory, times)
  std::vector<Line> lines;
  std::vector<Band> bands;
  std::vector<LegendEntry> legend;
};

std::string render_chart(const ChartSpec& spec);

// The bands' distinct names, by when each first starts (data_wait, micro_step, forward, ...):
// the order of the timeline's rows and of its legend.
std::vector<std::string> band_names_by_first_start(const std::vector<Band>& bands);

// Keeps a series drawable: at most about `columns` points, each column's lowest and highest
// (so a peak survives); a series already that short is returned as it is.
void envelope(std::vector<double>& x, std::vector<double>& y, size_t columns);

// The colour of a phase name (forward, backward, ...), fixed for the known ones.
std::string phase_color(const std::string& name);

std::string escape(const std::string& s);

}  // namespace frugal::report
