// Checks on a typed Config beyond the types of its values, as config validation runs them and
// as a model type's own checks (ModelSpec::check) receive them: every failure is a
// frugal::Error naming the dotted key and, for a config loaded from YAML, the file:line:column
// where it was written.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace frugal {

class ConfigCheck {
 public:
  virtual ~ConfigCheck() = default;

  // Fails at `key`, or at `near` when `key` was never written (a required key left out is
  // best shown next to the key that requires it).
  [[noreturn]] virtual void fail(const std::string& key, const std::string& message,
                                 const std::string& near = "") const = 0;
  // Whether the YAML (or a --set) wrote `prefix` or a key under it.
  virtual bool written(const std::string& prefix) const = 0;

  void require(bool ok, const std::string& key, const std::string& message,
               const std::string& near = "") const {
    if (!ok) fail(key, message, near);
  }
  template <class T>
  void at_least(T value, T min, const std::string& key) const {
    require(value >= min, key, fmt::format("must be >= {}, got {}", min, value));
  }
  void positive(double value, const std::string& key) const {
    require(value > 0 && std::isfinite(value), key, fmt::format("must be > 0, got {}", value));
  }
  void non_negative(double value, const std::string& key) const {
    require(value >= 0 && std::isfinite(value), key, fmt::format("must be >= 0, got {}", value));
  }
  // [0, 1): fractions and decay rates.
  void unit_interval(double value, const std::string& key) const {
    require(value >= 0 && value < 1, key, fmt::format("must be in [0, 1), got {}", value));
  }
  // One of `allowed`, or a failure listing them (with the nearest as a suggestion).
  void one_of(const std::string& value, const std::vector<std::string>& allowed,
              const std::string& key, const std::string& near = "") const;
};

}  // namespace frugal
