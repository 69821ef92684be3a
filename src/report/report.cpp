// The report page: the runs' legend and controls, the summary, the charts (report_chart.h)
// built from the runs' records (report_run.h), the configs. Colours belong to runs (to ranks
// in the per-rank charts, to phases in the stacked and timeline charts); line styles to what
// a line is (solid: train loss / peak; dashed: validation loss / current).
#include "frugal/report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "frugal/util/error.h"
#include "report_assets.h"
#include "report_chart.h"
#include "report_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {
namespace {

using report::ChartSpec;
using report::escape;
using report::Line;
using report::RunData;
using AxisUnit = chart::Unit;  // not "Unit": frugal::Unit (a model block) shares unity batches

const char* run_color(size_t i) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return colors[i % 8];
}

// The step's phase times (per step, in seconds), in the order the step runs them.
const std::vector<std::pair<std::string, std::string>>& phase_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"time_data_wait_s", "data_wait"},
      {"time_forward_s", "forward"},
      {"time_backward_s", "backward"},
      {"time_comm_wait_s", "comm_wait"},
      {"time_optimizer_s", "optimizer"}};
  return keys;
}

std::string label(double v) {
  if (std::isnan(v)) return "-";
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) return fmt::format("{:.2e}", v);
  return fmt::format("{:.4g}", v);
}

// A summary figure in the unit its chart shows it in ("12.3 k tok/s", "1.50 MiB", "41.2 ms").
std::string in_unit(double v, AxisUnit unit) {
  if (std::isnan(v)) return "-";
  const chart::Scale s = chart::display_scale(unit, std::abs(v));
  return fmt::format("{:.3g} {}", v * s.factor, s.suffix);
}

// Lines with a value other than zero: a phase that never took time (no communication in a
// run of one rank) gets no chart and no band.
std::vector<Line> nonzero(std::vector<Line> lines) {
  std::erase_if(lines, [](const Line& l) {
    return std::all_of(l.y.begin(), l.y.end(), [](double y) { return y == 0 || std::isnan(y); });
  });
  return lines;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One line per run of `key` (the runs' colours), labelled by run when there are several.
std::vector<Line> per_run(const std::vector<RunData>& runs, const std::string& key,
                          const std::string& what, bool dashed = false, bool from_steps = true) {
  std::vector<Line> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    Line l;
    report::series(from_steps ? runs[i].steps : runs[i].records, key, l.x, l.y);
    if (l.x.empty()) continue;
    l.label = runs.size() > 1 ? runs[i].name + " · " + what : what;
    l.color = run_color(i);
    l.dashed = dashed;
    out.push_back(std::move(l));
  }
  return out;
}

// Per-rank lists ("rank_step_time_s": [r0, r1, ...]) as one line per rank.
std::vector<Line> per_rank(const RunData& run, const std::string& key) {
  std::map<size_t, Line> by_rank;
  for (const auto& r : run.steps) {
    if (!r.contains(key) || !r.at(key).is_array()) continue;
    for (size_t i = 0; i < r.at(key).size(); ++i) {
      by_rank[i].x.push_back(r.at("step").get<double>());
      by_rank[i].y.push_back(r.at(key)[i].get<double>());
    }
  }
  std::vector<Line> out;
  for (auto& [rank, l] : by_rank) {
    l.label = fmt::format("rank {}", rank);
    l.color = run_color(rank);
    out.push_back(std::move(l));
  }
  return out;
}

std::string header(const std::vector<RunData>& runs, const std::vector<std::string>& diff) {
  std::string h = "<header><h1>frugal report: " +
                  escape(runs.size() == 1 ? runs[0].name : fmt::format("{} runs", runs.size())) +
                  "</h1><div class='runs'>";
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string settings;
    for (const auto& key : diff) {
      auto it = runs[i].config.find(key);
      settings += (settings.empty() ? "" : ", ") + key + ": " +
                  (it == runs[i].config.end() ? std::string("-") : it->second);
    }
    h += fmt::format(
        "<span class='run'><span class='swatch' style='background:{}'></span>{}{}"
        "</span>",
        run_color(i), escape(runs[i].name),
        settings.empty() ? "" : " <span class='diff'>(" + escape(settings) + ")</span>");
  }
  h += "</div><div class='controls'><label for='smoothing'>smoothing</label> <input "
       "type='range' id='smoothing' min='0' max='0.99' step='0.01' value='0.6'> <span "
       "id='smoothing-value'>0.60</span></div></header>";
  return h;
}

std::string summary(const std::vector<RunData>& runs) {
  std::string t = "<h2>Summary</h2><table><tr><th></th>";
  for (size_t i = 0; i < runs.size(); ++i) {
    t += fmt::format("<th style='color:{}'>{}</th>", run_color(i), escape(runs[i].name));
  }
  t += "</tr>";
  auto row = [&](const std::string& name, auto value) {
    t += "<tr><th>" + escape(name) + "</th>";
    for (const auto& run : runs) t += "<td>" + escape(value(run)) + "</td>";
    t += "</tr>";
  };
  auto values = [](const RunData& run, const char* key) {
    std::vector<double> v;
    for (const auto& r : run.steps) v.push_back(r.value(key, 0.0));
    return v;
  };
  row("run directory", [](const RunData& r) { return r.dir.string(); });
  row("steps logged", [](const RunData& r) { return std::to_string(r.steps.size()); });
  row("last step", [](const RunData& r) {
    return r.steps.empty() ? std::string("-")
                           : std::to_string(r.steps.back().at("step").get<int64_t>());
  });
  row("last loss", [](const RunData& r) {
    return r.steps.empty() ? std::string("-") : label(r.steps.back().at("loss").get<double>());
  });
  row("best validation loss", [](const RunData& r) {
    double best = NAN;
    for (const auto& rec : r.records) {
      if (rec.contains("val_loss") && rec.at("val_loss").is_number()) {
        const double v = rec.at("val_loss").get<double>();
        if (std::isnan(best) || v < best) best = v;
      }
    }
    return label(best);
  });
  row("median throughput", [&](const RunData& r) {
    return in_unit(median(values(r, "tokens_per_s")), AxisUnit::tokens_per_s);
  });
  row("median step time", [&](const RunData& r) {
    return in_unit(median(values(r, "step_time_s")), AxisUnit::seconds);
  });
  row("peak allocated", [&](const RunData& r) {
    const auto v = values(r, "mem_allocated_peak_bytes");
    return in_unit(v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()), AxisUnit::bytes);
  });
  row("ranks", [](const RunData& r) { return std::to_string(r.ranks); });
  return t + "</table>";
}

std::string training_charts(const std::vector<RunData>& runs) {
  const bool several = runs.size() > 1;
  std::string out = "<h2>Training</h2>";
  {
    ChartSpec c{.title = "Loss (per target)", .log_y = true, .log_toggle = true};
    c.lines = per_run(runs, "loss", "train");
    for (auto& l : per_run(runs, "val_loss", "validation loss", true, false)) {
      l.markers = true;
      c.lines.push_back(std::move(l));
    }
    c.legend = {{"train", several ? "#555" : run_color(0), false},
                {"validation loss", several ? "#555" : run_color(0), true}};
    out += report::render_chart(c);
  }
  out += report::render_chart(
      {.title = "Learning rate", .smooth = false, .lines = per_run(runs, "lr", "lr")});
  out += report::render_chart({.title = "Throughput",
                               .y_unit = AxisUnit::tokens_per_s,
                               .y_from_zero = true,
                               .lines = per_run(runs, "tokens_per_s", "tokens / s")});
  out += report::render_chart({.title = "Step time",
                               .y_unit = AxisUnit::seconds,
                               .y_from_zero = true,
                               .lines = per_run(runs, "step_time_s", "step time")});
  // The step's phases: stacked for one run (where the step's time goes), one chart per phase
  // for several (how each phase compares).
  bool any_phase = false;
  for (const auto& [key, name] : phase_keys()) {
    any_phase = any_phase || !nonzero(per_run(runs, key, name)).empty();
  }
  if (!any_phase) return out;
  if (!several) {
    ChartSpec c{.title = "Step phases",
                .y_unit = AxisUnit::seconds,
                .smooth = false,
                .stacked = true,
                .y_from_zero = true};
    for (const auto& [key, name] : phase_keys()) {
      for (auto& l : nonzero(per_run(runs, key, name))) {
        l.color = report::phase_color(name);
        c.legend.push_back({name, l.color, false});
        c.lines.push_back(std::move(l));
      }
    }
    out += report::render_chart(c);
  } else {
    for (const auto& [key, name] : phase_keys()) {
      auto lines = nonzero(per_run(runs, key, name));
      if (lines.empty()) continue;
      out += report::render_chart({.title = "Phase: " + name,
                                   .y_unit = AxisUnit::seconds,
                                   .y_from_zero = true,
                                   .lines = std::move(lines)});
    }
  }
  return out;
}

std::string memory_charts(const std::vector<RunData>& runs) {
  const bool several = runs.size() > 1;
  std::string out = "<h2>Memory</h2>";
  ChartSpec alloc{
      .title = "Allocated", .y_unit = AxisUnit::bytes, .smooth = false, .y_from_zero = true};
  alloc.lines = per_run(runs, "mem_allocated_peak_bytes", "peak since the previous record");
  for (auto& l : per_run(runs, "mem_allocated_bytes", "current", true)) alloc.lines.push_back(l);
  alloc.legend = {{"peak since the previous record", several ? "#555" : run_color(0), false},
                  {"current", several ? "#555" : run_color(0), true}};
  out += report::render_chart(alloc);
  out += report::render_chart({.title = "Host resident (RSS peak)",
                               .y_unit = AxisUnit::bytes,
                               .smooth = false,
                               .y_from_zero = true,
                               .lines = per_run(runs, "host_rss_peak_bytes", "RSS peak")});
  for (const auto& run : runs) {
    if (run.ranks < 2) continue;
    const std::string of = several ? " (" + run.name + ")" : "";
    out += "<h2>Ranks" + escape(of) + "</h2>";
    out += report::render_chart({.title = "Step time per rank" + of,
                                 .y_unit = AxisUnit::seconds,
                                 .y_from_zero = true,
                                 .lines = per_rank(run, "rank_step_time_s")});
    out += report::render_chart({.title = "Peak allocated per rank" + of,
                                 .y_unit = AxisUnit::bytes,
                                 .smooth = false,
                                 .y_from_zero = true,
                                 .lines = per_rank(run, "rank_mem_allocated_peak_bytes")});
  }
  return out;
}

std::string history_charts(const std::vector<RunData>& runs) {
  std::string out = "<h2>Allocator history</h2>";
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].memory) continue;
    any = true;
    const report::MemoryTimeline& m = *runs[i].memory;
    ChartSpec c{.title = fmt::format("Live bytes over time: {} ({})", runs[i].name, m.device),
                .x_unit = AxisUnit::seconds,
                .y_unit = AxisUnit::bytes,
                .smooth = false,
                .y_from_zero = true};
    c.lines.push_back({.label = "live", .color = run_color(i), .x = m.t, .y = m.live});
    c.bands = m.ranges;
    // The legend in the rows' order.
    for (const auto& name : report::band_names_by_first_start(m.ranges)) {
      c.legend.push_back({name, report::phase_color(name), false});
    }
    out += report::render_chart(c);
    std::string note = fmt::format("{}: {} events, highest {} bytes", m.file, m.events,
                                   static_cast<int64_t>(m.peak));
    if (m.dropped > 0) {
      note += fmt::format("; the {} oldest were dropped (memory.history_max_events)", m.dropped);
    }
    if (m.device == "cuda") {
      note +=
          "; it opens in PyTorch's memory viewer (https://pytorch.org/memory_viz); the "
          "phases are not drawn (CUDA's clock is not the trace's)";
    }
    out += "<p>" + escape(note) + ".</p>";
  }
  if (!any) out += "<p>Not recorded: set <code>memory.record_history: true</code>.</p>";
  return out;
}

std::string configs(const std::vector<RunData>& runs, const std::vector<std::string>& diff) {
  std::string out = "<h2>Resolved config</h2>";
  if (runs.size() > 1) {
    out += "<h3>Settings that differ</h3>";
    if (diff.empty()) {
      out += "<p>none (besides run.name and run.dir)</p>";
    } else {
      out += "<table><tr><th>setting</th>";
      for (size_t i = 0; i < runs.size(); ++i) {
        out += fmt::format("<th style='color:{}'>{}</th>", run_color(i), escape(runs[i].name));
      }
      out += "</tr>";
      for (const auto& key : diff) {
        out += "<tr><th>" + escape(key) + "</th>";
        for (const auto& run : runs) {
          auto it = run.config.find(key);
          out += "<td>" + escape(it == run.config.end() ? "-" : it->second) + "</td>";
        }
        out += "</tr>";
      }
      out += "</table>";
    }
  }
  for (const auto& run : runs) {
    const std::string text = run.config_text.empty() ? "(missing)" : escape(run.config_text);
    if (runs.size() == 1) {
      out += "<pre>" + text + "</pre>";
    } else {
      out +=
          "<details><summary>" + escape(run.name) + "</summary><pre>" + text + "</pre></details>";
    }
  }
  return out;
}

}  // namespace

std::string render_report(const std::vector<fs::path>& run_dirs) {
  if (run_dirs.empty()) throw Error("report: no run directory given");
  const std::vector<RunData> runs = report::read_runs(run_dirs);
  const std::vector<std::string> diff = report::differing_settings(runs);
  const std::string title = runs.size() == 1 ? runs[0].name : fmt::format("{} runs", runs.size());
  return "<!doctype html><html><head><meta charset='utf-8'><title>frugal report: " + escape(title) +
         "</title><style>" + report::kPageStyle + "</style></head><body>" + header(runs, diff) +
         summary(runs) + training_charts(runs) + memory_charts(runs) + history_charts(runs) +
         configs(runs, diff) + "<div id='hover'></div><script>" + report::kPageScript +
         "</script></body></html>\n";
}

std::string render_report(const fs::path& run_dir) {
  return render_report(std::vector<fs::path>{run_dir});
}

}  // namespace frugal
