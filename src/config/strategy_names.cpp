#include "frugal/config/strategy_names.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

namespace frugal {
namespace {

std::mutex& names_mutex() {
  static std::mutex m;
  return m;
}

// The registries (strategy/precision.cpp, strategy/checkpointing.cpp,
// engine/sharding_registry.cpp, optim/optimizer.cpp, optim/schedule.cpp) add their built-in names
// when the library loads, and those registered later; `auto` is no entry of theirs (it is resolved
// to one before use).
std::map<std::string, std::vector<std::string>, std::less<>>& names() {
  static std::map<std::string, std::vector<std::string>, std::less<>> n = {
      {"strategy.precision", {}},     {"strategy.checkpointing.policy", {}},
      {"strategy.sharding.mode", {}}, {"optim.type", {}},
      {"schedule.type", {}},
  };
  return n;
}

bool resolved_later(std::string_view key) {
  return key == "strategy.precision" || key == "strategy.checkpointing.policy";
}

}  // namespace

void register_strategy_name(std::string_view key, const std::string& name) {
  std::lock_guard<std::mutex> lock(names_mutex());
  auto it = names().find(key);
  if (it == names().end()) throw std::invalid_argument("unknown strategy setting " + std::string(key));
  if (std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
    it->second.push_back(name);
  }
}

std::vector<std::string> strategy_names(std::string_view key) {
  std::lock_guard<std::mutex> lock(names_mutex());
  auto it = names().find(key);
  if (it == names().end()) throw std::invalid_argument("unknown strategy setting " + std::string(key));
  std::vector<std::string> out = it->second;
  if (resolved_later(key)) out.push_back("auto");
  return out;
}

}  // namespace frugal
