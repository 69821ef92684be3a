#include "report_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace frugal::report {
namespace {

// The plot's box inside the SVG, in pixels.
constexpr double kWidth = 760, kLeft = 90, kRight = 16, kTop = 10, kPlotHeight = 200;
constexpr double kBottom = kTop + kPlotHeight;
constexpr double kAxisSpace = 34;  // tick labels and the x axis' name under the plot
constexpr double kBandRow = 12;

std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string join(const std::vector<double>& v) {
  std::string out;
  for (double x : v) {
    if (!out.empty()) out += ' ';
    out += std::isfinite(x) ? num(x) : "NaN";
  }
  return out;
}

struct Mapping {
  double x0, x1, y0, y1;
  bool log;
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); }
  double py(double y) const {
    const double f =
        log ? (std::log(y) - std::log(y0)) / (std::log(y1) - std::log(y0)) : (y - y0) / (y1 - y0);
    return kBottom - f * kPlotHeight;
  }
  bool drawable(double y) const { return std::isfinite(y) && (!log || y > 0); }
};

std::string points(const Mapping& m, const std::vector<double>& x, const std::vector<double>& y) {
  std::string out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (m.drawable(y[i])) out += fmt::format("{:.1f},{:.1f} ", m.px(x[i]), m.py(y[i]));
  }
  return out;
}

// Stacked areas: each line's values summed with those below it, over the union of x values.
std::vector<std::vector<double>> stack(const std::vector<Line>& lines, std::vector<double>& xs) {
  std::map<double, std::vector<double>> at;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (size_t j = 0; j < lines[i].x.size(); ++j) {
      auto& v = at[lines[i].x[j]];
      v.resize(lines.size(), 0.0);
      if (std::isfinite(lines[i].y[j])) v[i] = lines[i].y[j];
    }
  }
  std::vector<std::vector<double>> cum(lines.size());
  xs.clear();
  for (auto& [x, v] : at) {
    v.resize(lines.size(), 0.0);
    xs.push_back(x);
    double sum = 0;
    for (size_t i = 0; i < lines.size(); ++i) cum[i].push_back(sum += v[i]);
  }
  return cum;
}

std::string svg_body(const ChartSpec& spec, bool log_y, const chart::Scale& xs_scale,
                     const chart::Scale& ys_scale, const std::vector<Line>& lines) {
  // Ranges.
  std::vector<double> stack_x;
  std::vector<std::vector<double>> cum;
  if (spec.stacked) cum = stack(lines, stack_x);
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto take_y = [&](double y) {
    if (std::isfinite(y) && (!log_y || y > 0)) y0 = std::min(y0, y), y1 = std::max(y1, y);
  };
  for (const auto& l : lines) {
    for (size_t i = 0; i < l.x.size(); ++i) {
      x0 = std::min(x0, l.x[i]), x1 = std::max(x1, l.x[i]);
      if (!spec.stacked) take_y(l.y[i]);
    }
  }
  for (const auto& c : cum) {
    for (double y : c) take_y(y);
  }
  for (const auto& b : spec.bands) x0 = std::min(x0, b.start), x1 = std::max(x1, b.end);
  if (!std::isfinite(x0) || !std::isfinite(y0)) return {};
  if (spec.y_from_zero && !log_y) y0 = std::min(y0, 0.0), y1 = std::max(y1, 0.0);
  if (y1 == y0) {  // a constant: centred, with a margin of its own size
    const double pad = y0 != 0 ? std::abs(y0) * 0.1 : 1.0;
    y0 = log_y ? y0 / 1.2 : y0 - pad;
    y1 = log_y ? y1 * 1.2 : y1 + pad;
  } else if (!log_y) {
    // A twentieth of the range beyond the data, so that no line runs along the frame (the
    // ticks would otherwise end exactly at a maximum that is a round number); a zero the
    // axis starts from stays its bottom.
    const double pad = (y1 - y0) * 0.05;
    y1 += pad;
    if (!(spec.y_from_zero && y0 == 0)) y0 -= pad;
  }
  const chart::Ticks xt = chart::linear_ticks(x0, x1, 9, false, spec.x_unit == chart::Unit::steps);
  chart::Ticks yt;
  if (log_y) {
    const double pad = std::pow(y1 / y0, 0.04);
    yt = chart::log_ticks(y0 / pad, y1 * pad, 7);
  } else {
    yt = chart::linear_ticks(y0, y1, 6, true);
  }
  const Mapping m{xt.lo, xt.hi, yt.lo, yt.hi, log_y};
  std::map<std::string, int> rows;
  for (const auto& name : band_names_by_first_start(spec.bands)) {
    rows.emplace(name, static_cast<int>(rows.size()));
  }
  const double height = kBottom + kAxisSpace + kBandRow * static_cast<double>(rows.size()) + 4;

  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' class='chart{}' width='{}' height='{}' "
      "viewBox='0 0 {} {}' data-x0='{}' data-x1='{}' data-y0='{}' data-y1='{}' data-log='{}' "
      "data-left='{}' data-right='{}' data-top='{}' data-bottom='{}' data-xunit='{}' "
      "data-yunit='{}'>",
      spec.smooth ? " smooth" : "", kWidth, height, kWidth, height, num(m.x0), num(m.x1), num(m.y0),
      num(m.y1), log_y ? 1 : 0, kLeft, kWidth - kRight, kTop, kBottom,
      escape(spec.x_unit == chart::Unit::steps ? "step" : xs_scale.suffix),
      escape(ys_scale.suffix));
  svg += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='#fcfcfc' stroke='#888'/>",
                     kLeft, kTop, kWidth - kLeft - kRight, kPlotHeight);
  // Grid and tick labels.
  for (double v : yt.values) {
    const double y = m.py(v);
    svg += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#e3e3e3'/>", kLeft, y,
                       kWidth - kRight, y);
    svg += fmt::format("<text class='tick' x='{}' y='{:.1f}' text-anchor='end'>{}</text>",
                       kLeft - 4, y + 4, escape(chart::tick_label(v, yt.step, ys_scale.suffix)));
  }
  for (double v : xt.values) {
    const double x = m.px(v);
    svg += fmt::format("<line x1='{:.1f}' y1='{}' x2='{:.1f}' y2='{}' stroke='#e3e3e3'/>", x, kTop,
                       x, kBottom);
    svg += fmt::format("<text class='tick' x='{:.1f}' y='{}' text-anchor='middle'>{}</text>", x,
                       kBottom + 14, escape(chart::tick_label(v, xt.step, "")));
  }
  const std::string x_name = spec.x_unit == chart::Unit::steps ? "step"
                             : spec.x_unit == chart::Unit::seconds
                                 ? "time since recording started (" + xs_scale.suffix + ")"
                                 : xs_scale.suffix;
  svg += fmt::format("<text class='tick' x='{}' y='{}' text-anchor='end'>{}</text>",
                     kWidth - kRight, kBottom + 28, escape(x_name));
  svg += fmt::format(
      "<clipPath id='{{clip}}'><rect x='{}' y='{}' width='{}' height='{}'/>"
      "</clipPath><g clip-path='url(#{{clip}})'>",
      kLeft, kTop - 2, kWidth - kLeft - kRight, kPlotHeight + 4);
  // Data.
  if (spec.stacked) {
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string poly = points(m, stack_x, cum[i]);
      for (size_t j = stack_x.size(); j-- > 0;) {
        poly += fmt::format("{:.1f},{:.1f} ", m.px(stack_x[j]),
                            m.py(i == 0 ? std::max(m.y0, 0.0) : cum[i - 1][j]));
      }
      svg += fmt::format(
          "<polygon class='area' fill='{}' fill-opacity='0.8' stroke='{}' points='{}' "
          "data-xv='{}' data-v='{}' data-label='{}'/>",
          lines[i].color, lines[i].color, poly, join(lines[i].x), join(lines[i].y),
          escape(lines[i].label));
    }
  } else {
    for (const auto& l : lines) {
      const std::string dash = l.dashed ? " stroke-dasharray='6 3'" : "";
      const std::string pts = points(m, l.x, l.y);
      if (spec.smooth && !l.markers) {
        // The raw line, faint under the smoothed one (TensorBoard's way).
        svg += fmt::format(
            "<polyline class='raw' fill='none' stroke='{}' stroke-opacity='0.25' "
            "stroke-width='1.5'{} points='{}'/>",
            l.color, dash, pts);
      }
      svg += fmt::format(
          "<polyline class='data{}' fill='none' stroke='{}' stroke-width='2'{} points='{}' "
          "data-xv='{}' data-v='{}' data-label='{}'/>",
          l.markers ? " nosmooth" : "", l.color, dash, pts, join(l.x), join(l.y), escape(l.label));
      if (l.markers || l.x.size() == 1) {
        for (size_t i = 0; i < l.x.size(); ++i) {
          if (!m.drawable(l.y[i])) continue;
          svg += fmt::format(
              "<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'><title>{}: {}"
              "</title></circle>",
              m.px(l.x[i]), m.py(l.y[i]), l.color, escape(l.label), num(l.y[i]));
        }
      }
    }
  }
  svg += "</g>";
  // Ranges, one row per name under the axis.
  for (const auto& b : spec.bands) {
    const double y = kBottom + kAxisSpace + kBandRow * rows.at(b.name);
    const double xa = std::max(kLeft, m.px(b.start));
    const double xb = std::min(kWidth - kRight, m.px(b.end));
    if (xb < kLeft || xa > kWidth - kRight) continue;
    svg +=
        fmt::format("<rect class='band' x='{:.2f}' y='{}' width='{:.2f}' height='{}' fill='{}'/>",
                    xa, y, std::max(0.6, xb - xa), kBandRow - 3, phase_color(b.name));
  }
  for (const auto& [name, row] : rows) {
    svg += fmt::format("<text class='band-label' x='{}' y='{}' text-anchor='end'>{}</text>",
                       kLeft - 4, kBottom + kAxisSpace + kBandRow * row + 8, escape(name));
  }
  return svg + "</svg>";
}

std::string legend_html(const std::vector<LegendEntry>& legend) {
  if (legend.empty()) return {};
  std::string out = "<div class='chart-legend'>";
  for (const auto& e : legend) {
    out += fmt::format(
        "<span><svg width='22' height='10'><line x1='1' y1='5' x2='21' y2='5' stroke='{}' "
        "stroke-width='{}'{}/></svg>{}</span>",
        e.color, e.dashed ? 2 : 4, e.dashed ? " stroke-dasharray='5 2'" : "", escape(e.text));
  }
  return out + "</div>";
}

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void envelope(std::vector<double>& x, std::vector<double>& y, size_t columns) {
  if (x.size() <= 2 * columns || x.size() < 2) return;
  const double x0 = x.front(), x1 = x.back();
  const double width = (x1 - x0) / static_cast<double>(columns);
  std::vector<double> ox, oy;
  size_t i = 0;
  while (i < x.size()) {
    const double end = width > 0 ? x0 + width * (std::floor((x[i] - x0) / width) + 1) : INFINITY;
    size_t lo = i, hi = i, j = i;
    for (; j < x.size() && x[j] < end; ++j) {
      if (y[j] < y[lo]) lo = j;
      if (y[j] > y[hi]) hi = j;
    }
    if (j == i) j = i + 1;
    // In time order, so the line goes through both extremes of the column.
    ox.push_back(x[std::min(lo, hi)]);
    oy.push_back(y[std::min(lo, hi)]);
    if (lo != hi) {
      ox.push_back(x[std::max(lo, hi)]);
      oy.push_back(y[std::max(lo, hi)]);
    }
    i = j;
  }
  x = std::move(ox);
  y = std::move(oy);
}

std::string phase_color(const std::string& name) {
  static const std::map<std::string, std::string> known = {
      {"data_wait", "#9e9e9e"}, {"forward", "#4e79a7"},   {"backward", "#f28e2b"},
      {"comm_wait", "#b07aa1"}, {"optimizer", "#59a14f"}, {"step", "#bab0ac"},
      {"eval", "#76b7b2"},      {"checkpoint", "#edc948"}};
  for (const auto& [key, color] : known) {
    if (name.find(key) != std::string::npos) return color;
  }
  static const char* others[] = {"#e15759", "#ff9da7", "#9c755f", "#76b7b2", "#edc948"};
  size_t h = 0;
  for (char c : name) h = h * 31 + static_cast<unsigned char>(c);
  return others[h % 5];
}

std::vector<std::string> band_names_by_first_start(const std::vector<Band>& bands) {
  std::map<std::string, double> first_start;
  for (const auto& b : bands) {
    auto [it, fresh] = first_start.emplace(b.name, b.start);
    if (!fresh) it->second = std::min(it->second, b.start);
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, start] : first_start) order.emplace_back(start, name);
  std::sort(order.begin(), order.end());
  std::vector<std::string> names;
  for (auto& entry : order) names.push_back(std::move(entry.second));
  return names;
}

std::string render_chart(const ChartSpec& spec) {
  static int counter = 0;  // unique clip-path ids within a page
  // Display units: every value is scaled once, here; ticks and hover values use the result.
  double xmax = 0, ymax = 0;
  for (const auto& l : spec.lines) {
    for (double v : l.x) xmax = std::max(xmax, std::isfinite(v) ? std::abs(v) : 0.0);
    for (double v : l.y) ymax = std::max(ymax, std::isfinite(v) ? std::abs(v) : 0.0);
  }
  for (const auto& b : spec.bands) xmax = std::max({xmax, std::abs(b.start), std::abs(b.end)});
  if (spec.stacked) {
    std::vector<double> xs;
    for (const auto& c : stack(spec.lines, xs)) {
      for (double v : c) ymax = std::max(ymax, v);
    }
  }
  const chart::Scale xs = chart::display_scale(spec.x_unit, xmax);
  const chart::Scale ys = chart::display_scale(spec.y_unit, ymax);
  std::vector<Line> lines = spec.lines;
  for (auto& l : lines) {
    for (double& v : l.x) v *= xs.factor;
    for (double& v : l.y) v *= ys.factor;
  }
  ChartSpec scaled = spec;
  for (auto& b : scaled.bands) b.start *= xs.factor, b.end *= xs.factor;

  std::string out = "<figure><figcaption>" + escape(spec.title) + "</figcaption>";
  auto one = [&](bool log_y) {
    std::string body = svg_body(scaled, log_y, xs, ys, lines);
    const std::string id = fmt::format("clip{}", counter++);
    for (size_t p; (p = body.find("{clip}")) != std::string::npos;) body.replace(p, 6, id);
    return body;
  };
  std::string first = one(spec.log_y);
  if (first.empty()) return out + "<p>no data</p></figure>";
  if (spec.log_toggle) {
    // Both scales are drawn; a checkbox shows one (CSS only: works without the script).
    const std::string id = fmt::format("log{}", counter);
    out += fmt::format(
        "<input type='checkbox' class='logtoggle' id='{}'{}><label for='{}'> log scale</label>"
        "<div class='log'>{}</div><div class='lin'>{}</div>",
        id, spec.log_y ? " checked" : "", id, spec.log_y ? first : one(true),
        spec.log_y ? one(false) : first);
  } else {
    out += first;
  }
  return out + legend_html(spec.legend) + "</figure>";
}

}  // namespace frugal::report
