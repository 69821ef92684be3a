#include "frugal/train/memory_history_file.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace frugal {

std::string memory_history_json(const memory::CpuHistory& history,
                                const std::vector<trace::RecordedRange>& ranges,
                                int64_t dropped_ranges) {
  // Written by hand, not through a json value: a million events would take ~100 bytes each
  // as nlohmann nodes, against ~30 as text.
  std::string out = fmt::format(
      "{{\"device\": \"cpu\", \"start_us\": {}, \"end_us\": {}, \"live_at_start\": {}, "
      "\"dropped\": {}, \"dropped_ranges\": {},\n\"events\": [",
      history.start_us, history.end_us, history.live_at_start, history.dropped, dropped_ranges);
  out.reserve(out.size() + history.events.size() * 32);
  for (size_t i = 0; i < history.events.size(); ++i) {
    const auto& e = history.events[i];
    fmt::format_to(std::back_inserter(out), "{}[{},{},{}]", i ? ",\n" : "\n", e.t_us, e.delta,
                   e.live);
  }
  out += "],\n\"ranges\": [";
  for (size_t i = 0; i < ranges.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "{}[{},{},{}]", i ? ",\n" : "\n",
                   nlohmann::json(ranges[i].name).dump(), ranges[i].start_us, ranges[i].end_us);
  }
  out += "]}\n";
  return out;
}

}  // namespace frugal
