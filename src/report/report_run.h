// What `frugal report` reads from a run directory: the metrics records, the resolved config
// (as text and flattened to dotted keys, for the differences between runs), and the allocator
// history when one was recorded (the CPU tracker's memory_history.json or CUDA's
// memory_snapshot.pickle), reduced to a drawable timeline.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report_chart.h"

namespace frugal::report {

struct MemoryTimeline {
  std::string device;           // "cpu", or "cuda" for the pickle
  std::string file;             // its file name
  std::vector<double> t, live;  // seconds since recording started, live bytes
  std::vector<Band> ranges;     // phases, seconds since recording started
  int64_t events = 0;           // events in the file
  int64_t dropped = 0;          // events the bounded buffer overwrote
  double peak = 0;              // the highest live bytes of the file (before thinning)
};

struct RunData {
  std::filesystem::path dir;
  std::string name;                           // unique among the report's runs
  std::vector<nlohmann::json> records;        // every line of metrics.jsonl
  std::vector<nlohmann::json> steps;          // the training records (those with a loss)
  std::string config_text;                    // config.resolved.yaml, "" if missing
  std::map<std::string, std::string> config;  // flattened: "strategy.precision" -> "bf16-mixed"
  int ranks = 1;
  std::optional<MemoryTimeline> memory;
};

std::vector<RunData> read_runs(const std::vector<std::filesystem::path>& dirs);

// The flattened config keys whose values are not the same in every run (a key missing from a
// run counts as different); run.name and run.dir are left out: the runs' names say them.
std::vector<std::string> differing_settings(const std::vector<RunData>& runs);

// (step, value) of `key` in the records having it.
void series(const std::vector<nlohmann::json>& recs, const std::string& key, std::vector<double>& x,
            std::vector<double>& y);

}  // namespace frugal::report
