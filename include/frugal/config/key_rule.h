// What one config key accepts beyond its type: a range for a number, a closed set or a pattern
// for a name. Every row of the schema carries one (config/schema.h), and so does each key a
// model type lists (ModelSpec::keys); validation checks each key against its rule, so that
// validate.cpp holds only the relations between keys. Failures go through a ConfigCheck, which
// names the key and where it was written.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace frugal {

class ConfigCheck;

class KeyRule {
 public:
  KeyRule() = default;  // any value of the key's type

  // Numbers (finite): >= min, > min, and both ends of an interval ("must be in [0, 1)").
  static KeyRule at_least(double min);
  static KeyRule greater_than(double min);
  static KeyRule interval(double lo, double hi, bool lo_open, bool hi_open);
  static KeyRule unit_interval() { return interval(0, 1, false, true); }      // [0, 1)
  static KeyRule open_unit_interval() { return interval(0, 1, true, true); }  // (0, 1)
  // This rule, and <= max ("must be <= max" when only that fails).
  KeyRule at_most(double max) const;
  // An integer power of two in [lo, hi].
  static KeyRule power_of_two(int64_t lo, int64_t hi);

  // Names: one of `choices` (for a list, each item); one of the names registered for the key
  // (config/strategy_names.h: optimizers, schedules, precisions, sharding modes, policies),
  // asked when checked so that names registered from user code count; a whole-string match of
  // `regex` ("unknown <what> 'x' (expected <expected>)"); not empty (`message` when it is).
  static KeyRule one_of(std::vector<std::string> choices);
  static KeyRule registered();
  static KeyRule matches(std::string regex, std::string what, std::string expected);
  static KeyRule not_empty(std::string message = "must not be empty");

  bool any() const { return kind_ == Kind::any; }
  // What it accepts, in words ("> 0 and <= 1e+06", "one of: block, size"; "" for any value);
  // `key` names the registry a registered() rule reads.
  std::string describe(const std::string& key) const;

  // Checks `value` of the dotted `key` (a list's items as key[i], a fixed array's as key).
  void check(const ConfigCheck& c, const std::string& key, double value) const;
  void check(const ConfigCheck& c, const std::string& key, int64_t value) const;
  void check(const ConfigCheck& c, const std::string& key, uint64_t value) const;
  void check(const ConfigCheck& c, const std::string& key, bool value) const;
  void check(const ConfigCheck& c, const std::string& key, const std::string& value) const;
  void check(const ConfigCheck& c, const std::string& key,
             const std::vector<std::string>& values) const;
  void check(const ConfigCheck& c, const std::string& key,
             const std::vector<int64_t>& values) const;
  void check(const ConfigCheck& c, const std::string& key,
             const std::array<double, 2>& values) const;
  void check(const ConfigCheck& c, const std::string& key,
             const std::map<std::string, std::string>& values) const;

 private:
  enum class Kind { any, range, power_of_two, one_of, registered, pattern, not_empty };
  void check_number(const ConfigCheck& c, const std::string& key, double value,
                    const std::string& text) const;
  void check_name(const ConfigCheck& c, const std::string& key, const std::string& value,
                  const std::string& near) const;
  // Only number rules on a number, only name rules on a name: a row that says otherwise is a
  // mistake in frugal's own table, reported as such.
  void expect(bool numeric, const std::string& key) const;

  Kind kind_ = Kind::any;
  double lo_ = 0, hi_ = 0;
  bool has_lo_ = false, has_hi_ = false, lo_open_ = false, hi_open_ = false;
  bool interval_ = false;  // an interval's message names both ends
  std::vector<std::string>
      words_;  // one_of: choices; pattern: regex, what, expected; not_empty: message
};

}  // namespace frugal
