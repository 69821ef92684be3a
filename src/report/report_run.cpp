#include "report_run.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "frugal/report/allocation_timeline.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::report {
namespace {

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

void flatten(const YAML::Node& node, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsSequence()) {
    std::string v = "[";
    for (size_t i = 0; i < node.size(); ++i) {
      YAML::Emitter e;
      e << YAML::Flow << node[i];
      v += (i ? ", " : "") + std::string(e.c_str());
    }
    out[prefix] = v + "]";
  } else if (node.IsScalar()) {
    out[prefix] = node.Scalar();
  } else {
    out[prefix] = "";
  }
}

// The CPU tracker's file (memory_history.json): times relative to the start of recording.
MemoryTimeline read_cpu_history(const fs::path& file) {
  const json j = json::parse(read_all(file));
  MemoryTimeline m;
  m.device = j.value("device", "cpu");
  m.file = file.filename().string();
  const auto& events = j.at("events");
  const double start = j.contains("start_us") ? j.at("start_us").get<double>()
                       : events.empty()       ? 0.0
                                              : events.front().at(0).get<double>();
  m.events = static_cast<int64_t>(events.size());
  m.dropped = j.value("dropped", int64_t{0});
  if (j.contains("live_at_start") && m.dropped == 0) {
    m.t.push_back(0);
    m.live.push_back(j.at("live_at_start").get<double>());
  }
  for (const auto& e : events) {
    m.t.push_back((e.at(0).get<double>() - start) / 1e6);
    m.live.push_back(e.at(2).get<double>());
  }
  if (j.contains("end_us") && !m.live.empty()) {
    m.t.push_back((j.at("end_us").get<double>() - start) / 1e6);
    m.live.push_back(m.live.back());
  }
  for (const auto& r : j.value("ranges", json::array())) {
    // One row per kind of range: "micro_step 3" and "all_reduce 4.0 MiB" by their first word.
    std::string name = r.at(0).get<std::string>();
    name = name.substr(0, name.find(' '));
    m.ranges.push_back(
        {name, (r.at(1).get<double>() - start) / 1e6, (r.at(2).get<double>() - start) / 1e6});
  }
  return m;
}

std::optional<MemoryTimeline> read_memory(const fs::path& dir) {
  std::optional<MemoryTimeline> m;
  if (fs::exists(dir / "memory_history.json")) {
    try {
      m = read_cpu_history(dir / "memory_history.json");
    } catch (const json::exception& e) {
      throw Error(fmt::format("report: {} is not a memory history: {}",
                              (dir / "memory_history.json").string(), e.what()));
    }
  } else if (fs::exists(dir / "memory_snapshot.pickle")) {
    m.emplace();
    m->device = "cuda";
    m->file = "memory_snapshot.pickle";
    const auto timeline = allocation_timeline(read_all(dir / "memory_snapshot.pickle"));
    m->events = static_cast<int64_t>(timeline.size());
    // The CUDA trace's clock is not the trace ranges' (steady_clock), so no phases here.
    const double start = timeline.empty() ? 0.0 : timeline.front().first;
    for (const auto& [t, b] : timeline) {
      m->t.push_back((t - start) / 1e6);
      m->live.push_back(b);
    }
  }
  if (m) {
    for (double v : m->live) m->peak = std::max(m->peak, v);
    envelope(m->t, m->live, 1500);
  }
  return m;
}

}  // namespace

void series(const std::vector<json>& recs, const std::string& key, std::vector<double>& x,
            std::vector<double>& y) {
  x.clear();
  y.clear();
  for (const auto& r : recs) {
    if (r.contains(key) && r.at(key).is_number() && r.contains("step")) {
      x.push_back(r.at("step").get<double>());
      y.push_back(r.at(key).get<double>());
    }
  }
}

std::vector<RunData> read_runs(const std::vector<fs::path>& dirs) {
  std::vector<RunData> runs;
  for (const fs::path& dir : dirs) {
    const fs::path metrics = dir / "metrics.jsonl";
    if (!fs::exists(metrics)) {
      throw Error(
          fmt::format("report: '{}' has no metrics.jsonl (is it a run directory?)", dir.string()));
    }
    RunData run;
    run.dir = dir;
    run.records = read_records(metrics);
    for (const auto& r : run.records) {
      if (r.contains("loss")) run.steps.push_back(r);
    }
    if (!run.steps.empty() && run.steps.back().contains("rank_step_time_s")) {
      run.ranks = static_cast<int>(run.steps.back().at("rank_step_time_s").size());
    }
    const fs::path config = dir / "config.resolved.yaml";
    if (fs::exists(config)) {
      run.config_text = read_all(config);
      try {
        flatten(YAML::Load(run.config_text), "", run.config);
      } catch (const YAML::Exception&) {
        // Shown as text; only the differences between runs are lost.
      }
    }
    run.memory = read_memory(dir);
    runs.push_back(std::move(run));
  }
  // Names: the folder's, or with its parents' names when two runs share one.
  for (int depth = 1; depth <= 4; ++depth) {
    std::set<std::string> seen;
    bool unique = true;
    for (auto& run : runs) {
      fs::path p = fs::weakly_canonical(run.dir);
      std::vector<std::string> parts;
      for (int d = 0; d < depth && !p.filename().empty(); ++d, p = p.parent_path()) {
        parts.insert(parts.begin(), p.filename().string());
      }
      run.name.clear();
      for (const auto& part : parts) run.name += (run.name.empty() ? "" : "/") + part;
      unique = seen.insert(run.name).second && unique;
    }
    if (unique) break;
  }
  // Still the same (one directory given twice): numbered.
  std::map<std::string, int> count;
  for (auto& run : runs) {
    if (++count[run.name] > 1) run.name += fmt::format(" ({})", count[run.name]);
  }
  return runs;
}

std::vector<std::string> differing_settings(const std::vector<RunData>& runs) {
  std::set<std::string> keys;
  for (const auto& run : runs) {
    for (const auto& [k, v] : run.config) keys.insert(k);
  }
  std::vector<std::string> out;
  for (const auto& key : keys) {
    if (key == "run.name" || key == "run.dir") continue;
    std::set<std::string> values;
    size_t have = 0;
    for (const auto& run : runs) {
      if (auto it = run.config.find(key); it != run.config.end()) {
        values.insert(it->second);
        ++have;
      }
    }
    if (values.size() > 1 || have != runs.size()) out.push_back(key);
  }
  return out;
}

}  // namespace frugal::report
