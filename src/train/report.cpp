#include "frugal/train/report.h"

#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {
namespace {

using Series = std::vector<std::pair<double, double>>;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> read_records(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception&) {
      // A line cut short by a crash: the rest of the file still reports.
    }
  }
  return out;
}

std::string label(double v) {
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) return fmt::format("{:.2e}", v);
  return fmt::format("{:.4g}", v);
}

// A line chart: one polyline per named series, axes with min / max labels, a legend.
std::string chart(const std::string& title, const std::string& unit,
                  const std::vector<std::pair<std::string, Series>>& lines) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& [name, pts] : lines) {
    for (const auto& [x, y] : pts) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = fmt::format("<figure><figcaption>{}{}</figcaption>", escape(title),
                                unit.empty() ? "" : " (" + escape(unit) + ")");
  if (!std::isfinite(x0)) return svg + "<p>no data</p></figure>";
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {  // a constant: centred, with a margin of its own size
    const double pad = y0 != 0 ? std::abs(y0) * 0.1 : 1.0;
    y0 -= pad;
    y1 += pad;
  }
  const double W = 640, H = 220, L = 70, R = 10, T = 10, B = 30;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); };
  svg += fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' "
                     "viewBox='0 0 {} {}'>", W, H + 16.0 * lines.size(), W, H + 16.0 * lines.size());
  svg += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='#fafafa' stroke='#999'/>", L,
                     T, W - L - R, H - T - B);
  svg += fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='end'>{}</text>", L - 4, T + 10,
                     label(y1));
  svg += fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='end'>{}</text>", L - 4,
                     H - B, label(y0));
  svg += fmt::format("<text x='{}' y='{}' font-size='11'>{}</text>", L, H - B + 14, label(x0));
  svg += fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='end'>{}</text>", W - R,
                     H - B + 14, label(x1));
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& [name, pts] = lines[i];
    const char* color = colors[i % 8];
    std::string path;
    for (const auto& [x, y] : pts) {
      if (std::isfinite(y)) path += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    }
    if (pts.size() == 1) {
      svg += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>", px(pts[0].first),
                         py(pts[0].second), color);
    } else {
      svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>",
                         color, path);
    }
    svg += fmt::format("<rect x='{}' y='{}' width='10' height='10' fill='{}'/><text x='{}' y='{}' "
                       "font-size='11'>{}</text>",
                       L, H + 16.0 * i - 4, color, L + 14, H + 16.0 * i + 5, escape(name));
  }
  return svg + "</svg></figure>";
}

Series series(const std::vector<json>& recs, const std::string& key, double scale = 1.0) {
  Series s;
  for (const auto& r : recs) {
    if (r.contains(key) && r.at(key).is_number()) {
      s.emplace_back(r.at("step").get<double>(), r.at(key).get<double>() * scale);
    }
  }
  return s;
}

// Per-rank lists ("rank_step_time_s": [r0, r1, ...]) as one series per rank.
std::vector<std::pair<std::string, Series>> per_rank(const std::vector<json>& recs,
                                                     const std::string& key, double scale = 1.0) {
  std::map<size_t, Series> by_rank;
  for (const auto& r : recs) {
    if (!r.contains(key) || !r.at(key).is_array()) continue;
    for (size_t i = 0; i < r.at(key).size(); ++i) {
      by_rank[i].emplace_back(r.at("step").get<double>(), r.at(key)[i].get<double>() * scale);
    }
  }
  std::vector<std::pair<std::string, Series>> out;
  for (auto& [rank, s] : by_rank) out.emplace_back(fmt::format("rank {}", rank), std::move(s));
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<std::pair<double, double>> allocation_timeline(const std::string& snapshot_pickle) {
  // A plain pickle (not torch.save's zip): the JIT unpickler reads it.
  c10::IValue root = torch::jit::unpickle(snapshot_pickle.data(), snapshot_pickle.size());
  std::vector<std::pair<double, double>> out;
  if (!root.isGenericDict()) return out;
  auto dict = root.toGenericDict();
  if (!dict.contains("device_traces")) return out;
  auto traces = dict.at("device_traces").toList();
  if (traces.empty()) return out;
  double allocated = 0;
  for (const c10::IValue& ev : traces.get(0).toList()) {
    auto e = ev.toGenericDict();
    const std::string action = e.at("action").toStringRef();
    const double size = static_cast<double>(e.at("size").toInt());
    if (action == "alloc") allocated += size;
    else if (action == "free_completed") allocated -= size;
    else continue;
    const double t = e.contains("time_us") ? static_cast<double>(e.at("time_us").toInt())
                                           : static_cast<double>(out.size());
    out.emplace_back(t, allocated);
  }
  return out;
}

std::string render_report(const fs::path& run_dir) {
  const fs::path metrics_file = run_dir / "metrics.jsonl";
  if (!fs::exists(metrics_file)) {
    throw Error(fmt::format("report: '{}' has no metrics.jsonl (is it a run directory?)",
                            run_dir.string()));
  }
  const auto recs = read_records(metrics_file);
  std::vector<json> steps;
  for (const auto& r : recs) {
    if (r.contains("loss")) steps.push_back(r);
  }
  constexpr double MiB = 1.0 / (1024 * 1024);
  std::string body;
  // Summary.
  std::vector<double> tok, times, peaks;
  double best_val = NAN;
  for (const auto& r : steps) {
    tok.push_back(r.value("tokens_per_s", 0.0));
    times.push_back(r.value("step_time_s", 0.0));
    peaks.push_back(r.value("mem_allocated_peak_bytes", 0.0));
  }
  for (const auto& r : recs) {
    if (r.contains("val_loss") && r.at("val_loss").is_number()) {
      const double v = r.at("val_loss").get<double>();
      if (std::isnan(best_val) || v < best_val) best_val = v;
    }
  }
  const int ranks = !steps.empty() && steps.back().contains("rank_step_time_s")
                        ? static_cast<int>(steps.back().at("rank_step_time_s").size())
                        : 1;
  body += "<h2>Summary</h2><table>";
  auto row = [&](const std::string& k, const std::string& v) {
    body += "<tr><th>" + escape(k) + "</th><td>" + escape(v) + "</td></tr>";
  };
  row("run directory", run_dir.string());
  row("steps logged", std::to_string(steps.size()));
  row("last step", steps.empty() ? "-" : std::to_string(steps.back().at("step").get<int64_t>()));
  row("last loss", steps.empty() ? "-" : label(steps.back().at("loss").get<double>()));
  row("best validation loss", std::isnan(best_val) ? "-" : label(best_val));
  row("median tokens / s", label(median(tok)));
  row("median step time (s)", label(median(times)));
  row("peak allocated (MiB)", label(peaks.empty() ? 0.0 : *std::max_element(peaks.begin(), peaks.end()) * MiB));
  row("ranks", std::to_string(ranks));
  body += "</table><h2>Training</h2>";
  Series val = series(recs, "val_loss");
  std::vector<std::pair<std::string, Series>> loss = {{"train loss", series(steps, "loss")}};
  if (!val.empty()) loss.emplace_back("validation loss", val);
  body += chart("Loss", "per target", loss);
  body += chart("Learning rate", "", {{"lr", series(steps, "lr")}});
  body += chart("Throughput", "tokens / s", {{"tokens / s", series(steps, "tokens_per_s")}});
  body += "<h2>Memory</h2>";
  body += chart("Allocated", "MiB", {{"peak since the previous record", series(steps, "mem_allocated_peak_bytes", MiB)},
                                     {"current", series(steps, "mem_allocated_bytes", MiB)}});
  body += chart("Host resident", "MiB", {{"RSS peak", series(steps, "host_rss_peak_bytes", MiB)}});
  if (ranks > 1) {
    body += "<h2>Ranks</h2>";
    body += chart("Step time per rank", "s", per_rank(steps, "rank_step_time_s"));
    body += chart("Peak allocated per rank", "MiB", per_rank(steps, "rank_mem_allocated_peak_bytes", MiB));
  }
  const fs::path snapshot = run_dir / "memory_snapshot.pickle";
  body += "<h2>Allocator history</h2>";
  if (fs::exists(snapshot)) {
    Series timeline;
    for (const auto& [t, b] : allocation_timeline(read_all(snapshot))) timeline.emplace_back(t / 1e6, b * MiB);
    body += chart("Allocated over time (device 0)", "MiB vs s", {{"allocated", timeline}});
    body += "<p>" + escape(snapshot.filename().string()) +
            " opens in PyTorch's memory viewer (https://pytorch.org/memory_viz).</p>";
  } else {
    body += "<p>Not recorded: set <code>memory.record_history: true</code> (CUDA runs).</p>";
  }
  const fs::path config = run_dir / "config.resolved.yaml";
  body += "<h2>Resolved config</h2><pre>" +
          (fs::exists(config) ? escape(read_all(config)) : std::string("(missing)")) + "</pre>";
  return "<!doctype html><html><head><meta charset='utf-8'><title>frugal report: " +
         escape(run_dir.filename().string()) +
         "</title><style>body{font-family:sans-serif;margin:24px;max-width:720px}"
         "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:2px 8px;"
         "text-align:left}figure{margin:12px 0}figcaption{font-weight:bold}"
         "pre{background:#f4f4f4;padding:8px;font-size:12px}</style></head><body><h1>frugal "
         "report: " +
         escape(run_dir.filename().string()) + "</h1>" + body + "</body></html>\n";
}

}  // namespace frugal
