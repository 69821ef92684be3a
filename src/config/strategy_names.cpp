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

std::map<std::string, std::vector<std::string>, std::less<>>& names() {
  static std::map<std::string, std::vector<std::string>, std::less<>> n = {
      {"strategy.precision", {"fp32", "bf16-mixed", "fp16-mixed", "auto"}},
      {"strategy.checkpointing.policy", {"none", "full", "every_k", "selective", "auto"}},
      {"strategy.sharding.mode", {"none", "ddp", "zero1", "zero2", "zero3"}},
  };
  return n;
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
  return it->second;
}

}  // namespace frugal
