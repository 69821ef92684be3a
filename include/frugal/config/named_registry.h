// One registry of named entries, the shape of every "chosen by name in YAML, more can be
// registered from C++" choice: precisions, checkpointing policies, sharding modes, model
// types. Built-in entries come with it; user code adds more (a name already taken, built in or
// registered, is a frugal::Error); a config's name is looked up with a message that lists
// what exists.
// Where the config key's names are validated (strategy_names.h), the built-in entries and
// every added one are the names that key accepts, in that order: the names are written once,
// here. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/config/strategy_names.h"
#include "frugal/util/error.h"

namespace frugal {

template <typename Entry>
class NamedRegistry {
 public:
  // `key`: the config key whose value names an entry ("strategy.precision"); `what`: the noun
  // in messages ("precision"); `validated`: whether config validation checks that key's names
  // (their order in its messages is the builtins' order here).
  NamedRegistry(std::string key, std::string what,
                std::vector<std::pair<std::string, Entry>> builtins, bool validated)
      : key_(std::move(key)), what_(std::move(what)), validated_(validated) {
    for (auto& [name, entry] : builtins) {
      entries_.emplace(name, std::move(entry));
      if (validated_) register_strategy_name(key_, name);
    }
  }

  void add(const std::string& name, Entry entry) {
    if (name.empty()) throw Error(key_ + ": a registered " + what_ + " needs a name");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!entries_.emplace(name, std::move(entry)).second) {
        throw Error(key_ + ": '" + name + "' is already a " + what_);
      }
    }
    if (validated_) register_strategy_name(key_, name);
  }

  std::optional<Entry> find(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }

  // The entry, or a frugal::Error "<key>: unknown <what> 'name' (known: a, b, ...)".
  Entry get(const std::string& name) const {
    if (auto entry = find(name)) return *entry;
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(key_ + ": unknown " + what_ + " '" + name + "' (known: " + known + ")");
  }

  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, _] : entries_) out.push_back(name);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::string key_, what_;
  std::map<std::string, Entry> entries_;
  bool validated_;
};

}  // namespace frugal
