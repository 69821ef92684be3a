#include "frugal/config/key_rule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <stdexcept>

#include "frugal/config/config_check.h"
#include "frugal/config/strategy_names.h"

namespace frugal {
namespace {

// A number as a message shows it: the short form (1e+07, 0.0003) where it is exact, else
// every digit.
std::string shown(double v) {
  const std::string g = fmt::format("{:g}", v);
  return !std::isfinite(v) || std::strtod(g.c_str(), nullptr) == v ? g : fmt::format("{}", v);
}

}  // namespace

KeyRule KeyRule::at_least(double min) {
  KeyRule r;
  r.kind_ = Kind::range;
  r.lo_ = min;
  r.has_lo_ = true;
  return r;
}

KeyRule KeyRule::greater_than(double min) {
  KeyRule r = at_least(min);
  r.lo_open_ = true;
  return r;
}

KeyRule KeyRule::interval(double lo, double hi, bool lo_open, bool hi_open) {
  KeyRule r = at_least(lo);
  r.lo_open_ = lo_open;
  r.hi_ = hi;
  r.has_hi_ = true;
  r.hi_open_ = hi_open;
  r.interval_ = true;
  return r;
}

KeyRule KeyRule::at_most(double max) const {
  KeyRule r = *this;
  r.kind_ = Kind::range;
  r.hi_ = max;
  r.has_hi_ = true;
  r.hi_open_ = false;
  return r;
}

KeyRule KeyRule::power_of_two(int64_t lo, int64_t hi) {
  KeyRule r = interval(static_cast<double>(lo), static_cast<double>(hi), false, false);
  r.kind_ = Kind::power_of_two;
  return r;
}

KeyRule KeyRule::one_of(std::vector<std::string> choices) {
  KeyRule r;
  r.kind_ = Kind::one_of;
  r.words_ = std::move(choices);
  return r;
}

KeyRule KeyRule::registered() {
  KeyRule r;
  r.kind_ = Kind::registered;
  return r;
}

KeyRule KeyRule::matches(std::string regex, std::string what, std::string expected) {
  KeyRule r;
  r.kind_ = Kind::pattern;
  r.words_ = {std::move(regex), std::move(what), std::move(expected)};
  return r;
}

KeyRule KeyRule::not_empty(std::string message) {
  KeyRule r;
  r.kind_ = Kind::not_empty;
  r.words_ = {std::move(message)};
  return r;
}

std::string KeyRule::describe(const std::string& key) const {
  switch (kind_) {
    case Kind::any:
      return "";
    case Kind::power_of_two:
      return fmt::format("a power of two in [{}, {}]", shown(lo_), shown(hi_));
    case Kind::range:
      if (interval_) {
        return fmt::format("in {}{}, {}{}", lo_open_ ? "(" : "[", shown(lo_), shown(hi_),
                           hi_open_ ? ")" : "]");
      }
      if (has_lo_ && has_hi_) {
        return fmt::format("{} {} and <= {}", lo_open_ ? ">" : ">=", shown(lo_), shown(hi_));
      }
      return has_lo_ ? fmt::format("{} {}", lo_open_ ? ">" : ">=", shown(lo_))
                     : fmt::format("<= {}", shown(hi_));
    case Kind::one_of:
      return fmt::format("one of: {}", fmt::join(words_, ", "));
    case Kind::registered:
      return fmt::format("one of: {} (or a name registered from code)",
                         fmt::join(strategy_names(key), ", "));
    case Kind::pattern:
      return words_[2];
    case Kind::not_empty:
      return "not empty";
  }
  return "";
}

void KeyRule::expect(bool numeric, const std::string& key) const {
  if (kind_ == Kind::any) return;
  const bool number_rule = kind_ == Kind::range || kind_ == Kind::power_of_two;
  if (number_rule != numeric) {
    throw std::logic_error(fmt::format("config schema: the rule on {} does not fit its type", key));
  }
}

void KeyRule::check_number(const ConfigCheck& c, const std::string& key, double value,
                           const std::string& text) const {
  const bool above = !has_lo_ || (lo_open_ ? value > lo_ : value >= lo_);
  const bool below = !has_hi_ || (hi_open_ ? value < hi_ : value <= hi_);
  if (kind_ == Kind::power_of_two) {
    const auto n = static_cast<int64_t>(value);
    c.require(
        above && below && (n & (n - 1)) == 0, key,
        fmt::format("must be a power of two in [{}, {}], got {}", shown(lo_), shown(hi_), text));
    return;
  }
  // NaN fails every comparison, infinities the finite test.
  const bool ok = above && below && std::isfinite(value);
  if (ok) return;
  if (interval_) {
    c.fail(key, fmt::format("must be in {}{}, {}{}, got {}", lo_open_ ? "(" : "[", shown(lo_),
                            shown(hi_), hi_open_ ? ")" : "]", text));
  }
  // (NaN and -inf fail `above`; an infinity is no number whatever the bounds.)
  if (!above || !has_hi_ || !std::isfinite(value)) {
    c.fail(key, fmt::format("must be {} {}, got {}", lo_open_ ? ">" : ">=", shown(lo_), text));
  }
  c.fail(key, fmt::format("must be <= {}, got {}", shown(hi_), text));
}

void KeyRule::check_name(const ConfigCheck& c, const std::string& key, const std::string& value,
                         const std::string& near) const {
  switch (kind_) {
    case Kind::one_of:
      c.one_of(value, words_, key, near);
      return;
    case Kind::registered:
      c.one_of(value, strategy_names(key), key, near);
      return;
    case Kind::pattern:
      c.require(std::regex_match(value, std::regex(words_[0])), key,
                fmt::format("unknown {} '{}' (expected {})", words_[1], value, words_[2]), near);
      return;
    case Kind::not_empty:
      c.require(!value.empty(), key, words_[0], near);
      return;
    default:
      return;
  }
}

void KeyRule::check(const ConfigCheck& c, const std::string& key, double value) const {
  expect(true, key);
  if (kind_ != Kind::any) check_number(c, key, value, shown(value));
}

void KeyRule::check(const ConfigCheck& c, const std::string& key, int64_t value) const {
  expect(true, key);
  if (kind_ != Kind::any)
    check_number(c, key, static_cast<double>(value), fmt::format("{}", value));
}

void KeyRule::check(const ConfigCheck& c, const std::string& key, uint64_t value) const {
  expect(true, key);
  if (kind_ != Kind::any)
    check_number(c, key, static_cast<double>(value), fmt::format("{}", value));
}

void KeyRule::check(const ConfigCheck&, const std::string& key, bool) const {
  if (kind_ != Kind::any) throw std::logic_error("config schema: a rule on the switch " + key);
}

void KeyRule::check(const ConfigCheck& c, const std::string& key, const std::string& value) const {
  expect(false, key);
  check_name(c, key, value, "");
}

void KeyRule::check(const ConfigCheck& c, const std::string& key,
                    const std::vector<std::string>& values) const {
  expect(false, key);
  for (size_t i = 0; i < values.size(); ++i)
    check_name(c, fmt::format("{}[{}]", key, i), values[i], key);
}

void KeyRule::check(const ConfigCheck& c, const std::string& key,
                    const std::vector<int64_t>& values) const {
  for (int64_t v : values) check(c, key, v);
}

void KeyRule::check(const ConfigCheck& c, const std::string& key,
                    const std::array<double, 2>& values) const {
  for (double v : values) check(c, key, v);
}

void KeyRule::check(const ConfigCheck&, const std::string& key,
                    const std::map<std::string, std::string>&) const {
  if (kind_ != Kind::any) throw std::logic_error("config schema: a rule on the map " + key);
}

}  // namespace frugal
