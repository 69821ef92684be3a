#include "frugal/report/allocation_timeline.h"

#include <torch/csrc/jit/serialization/pickle.h>

namespace frugal {

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
    if (action == "alloc")
      allocated += size;
    else if (action == "free_completed")
      allocated -= size;
    else
      continue;
    const double t = e.contains("time_us") ? static_cast<double>(e.at("time_us").toInt())
                                           : static_cast<double>(out.size());
    out.emplace_back(t, allocated);
  }
  return out;
}

}  // namespace frugal
