// Typed reads of one key. Strict on purpose: a value of the wrong kind is an error naming the
// key and what was found, never a silent default. Quoted scalars count like plain ones (a
// config can say lr: "3e-4"), since YAML users quote inconsistently.
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "internal.h"

namespace frugal::config_detail {
namespace {

[[noreturn]] void expected(const Entry& e, std::string_view what) {
  fail(e.loc, fmt::format("{}: expected {}, got {}", e.path, what,
                          e.is_map ? "a map" : describe(e.value())));
}

// The scalar text of a leaf, or an error saying `what` was expected.
const std::string& scalar(const Entry& e, std::string_view what) {
  if (e.is_map || !e.value().IsScalar()) expected(e, what);
  return e.value().Scalar();
}

std::string_view without_plus(const std::string& s) {
  std::string_view v(s);
  if (!v.empty() && v[0] == '+') v.remove_prefix(1);
  return v;
}

bool parse_double(const std::string& s, double& out) {
  // YAML spells the special values .inf, -.inf, .nan (any of three capitalisations).
  static const std::pair<const char*, double> special[] = {
      {".inf", INFINITY},   {".Inf", INFINITY},  {".INF", INFINITY},   {"+.inf", INFINITY},
      {"+.Inf", INFINITY},  {"+.INF", INFINITY}, {"-.inf", -INFINITY}, {"-.Inf", -INFINITY},
      {"-.INF", -INFINITY}, {".nan", NAN},       {".NaN", NAN},        {".NAN", NAN}};
  for (const auto& [text, value] : special)
    if (s == text) return out = value, true;
  const std::string_view v = without_plus(s);
  if (v.empty() || v[0] == '+') return false;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && end == v.data() + v.size();
}

// Integers may be written as integral floats too (max_steps: 1e5), but never lose a fraction.
template <class Int>
void decode_integer(const Entry& e, Int& out, std::string_view what) {
  const std::string& s = scalar(e, what);
  const std::string_view v = without_plus(s);
  Int value{};
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (!v.empty() && end == v.data() + v.size()) {
    if (ec == std::errc()) return void(out = value);
    if (ec == std::errc::result_out_of_range)
      fail(e.loc, fmt::format("{}: {} is out of range", e.path, s));
  }
  double d = 0;
  if (!parse_double(s, d) || !std::isfinite(d) || d != std::trunc(d)) expected(e, what);
  if (std::is_unsigned_v<Int> && d < 0) expected(e, what);
  // 2^63 and 2^64 are exact doubles, so these bounds compare exactly.
  const double lo = static_cast<double>(std::numeric_limits<Int>::min());
  const double hi = std::ldexp(1.0, std::numeric_limits<Int>::digits);
  if (d < lo || d >= hi) fail(e.loc, fmt::format("{}: {} is out of range", e.path, s));
  out = static_cast<Int>(d);
}

// Item i of a sequence as an entry of its own ("model.hidden[1]", at the item's position).
Entry element(const Entry& e, size_t i) {
  return leaf_entry(std::to_string(i), fmt::format("{}[{}]", e.path, i), item_loc(e, i),
                   e.value()[i]);
}

enum class SizeParse { ok, malformed, fraction, too_large };

// "1.5" and "GB" -> 1500000000. Exact integer arithmetic (no doubles), so "1.1GB" is exactly
// 1100000000 and "1.5B" is refused rather than rounded.
SizeParse parse_size(std::string_view number, std::string_view unit, int64_t& out) {
  static const std::pair<std::string_view, uint64_t> units[] = {
      {"B", 1},
      {"KB", 1000ull},
      {"MB", 1000ull * 1000},
      {"GB", 1000ull * 1000 * 1000},
      {"TB", 1000ull * 1000 * 1000 * 1000},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40}};
  uint64_t multiplier = 0;
  for (const auto& [name, m] : units)
    if (unit == name) multiplier = m;
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);  // "2 GiB"
  const size_t point = number.find('.');
  std::string_view whole = number.substr(0, point);
  std::string_view fraction = point == std::string_view::npos ? "" : number.substr(point + 1);
  const auto digits = [](std::string_view v) {
    return v.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (multiplier == 0 || (whole.empty() && fraction.empty()) || !digits(whole) ||
      !digits(fraction) || (point != std::string_view::npos && fraction.empty()))
    return SizeParse::malformed;
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);

  // bytes = mantissa * multiplier / 10^fraction.size(), which must divide exactly.
  uint64_t mantissa = 0;
  for (const std::string_view part : {whole, fraction})
    for (char ch : part)
      if (__builtin_mul_overflow(mantissa, 10, &mantissa) ||
          __builtin_add_overflow(mantissa, static_cast<uint64_t>(ch - '0'), &mantissa))
        return SizeParse::too_large;
  uint64_t product = 0;
  if (__builtin_mul_overflow(mantissa, multiplier, &product)) return SizeParse::too_large;
  if (fraction.size() > 19)  // 10^20 > 2^64 > product: only 0 divides
    return product == 0 ? (out = 0, SizeParse::ok) : SizeParse::fraction;
  uint64_t divisor = 1;
  for (size_t i = 0; i < fraction.size(); ++i) divisor *= 10;
  if (product % divisor != 0) return SizeParse::fraction;
  const uint64_t bytes = product / divisor;
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return SizeParse::too_large;
  out = static_cast<int64_t>(bytes);
  return SizeParse::ok;
}

}  // namespace

void decode(const Entry& e, std::string& out) {
  if (!e.is_map && e.value().IsNull()) return void(out.clear());  // `key:` alone is ""
  out = scalar(e, "a string");
}

void decode(const Entry& e, int64_t& out) { decode_integer(e, out, "an integer"); }

void decode(const Entry& e, uint64_t& out) { decode_integer(e, out, "a non-negative integer"); }

void decode(const Entry& e, double& out) {
  if (!parse_double(scalar(e, "a number"), out)) expected(e, "a number");
}

namespace {
// YAML's spellings of a boolean into `out`, or the error that `what` was expected.
void decode_bool_or(const Entry& e, bool& out, std::string_view what) {
  std::string s = scalar(e, what);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "true" || s == "yes" || s == "on") return void(out = true);
  if (s == "false" || s == "no" || s == "off") return void(out = false);
  expected(e, what);
}
}  // namespace

void decode(const Entry& e, bool& out) { decode_bool_or(e, out, "true or false"); }

void decode(const Entry& e, std::vector<int64_t>& out) {
  constexpr std::string_view what = "a list of integers";
  if (e.is_map || !(e.value().IsSequence() || e.value().IsNull())) expected(e, what);
  std::vector<int64_t> values;
  for (size_t i = 0; i < e.value().size(); ++i) {
    const Entry item = element(e, i);
    values.push_back(0);
    decode(item, values.back());
  }
  out = std::move(values);
}

void decode(const Entry& e, std::vector<std::string>& out) {
  constexpr std::string_view what = "a list of strings";
  // One string is a list of one (`targets: all-linear`).
  if (!e.is_map && e.value().IsScalar()) {
    out = {e.value().Scalar()};
    return;
  }
  if (e.is_map || !(e.value().IsSequence() || e.value().IsNull())) expected(e, what);
  std::vector<std::string> values;
  for (size_t i = 0; i < e.value().size(); ++i) {
    const Entry item = element(e, i);
    // An empty item (`- `) would silently be "": refuse it like a nested list.
    if (!item.value().IsScalar()) expected(item, "a string");
    values.push_back(item.value().Scalar());
  }
  out = std::move(values);
}

void decode(const Entry& e, Bytes<int64_t> out) {
  constexpr std::string_view what =
      "a number of bytes or a size with a unit such as 512MiB, 2GiB, 1.5GB, 300MB, 64KiB "
      "(B; KiB, MiB, GiB, TiB = 1024^n; KB, MB, GB, TB = 1000^n)";
  const std::string& s = scalar(e, what);
  const size_t unit_at = s.find_last_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
  const std::string_view unit = std::string_view(s).substr(unit_at + 1);
  if (unit.empty() || unit_at == std::string::npos)
    return decode_integer(e, out.value, what);  // no unit: bytes (1e9 too), or the error
  switch (parse_size(std::string_view(s).substr(0, unit_at + 1), unit, out.value)) {
    case SizeParse::ok:
      return;
    case SizeParse::malformed:
      expected(e, what);
    case SizeParse::fraction:
      fail(e.loc, fmt::format("{}: {} is not a whole number of bytes", e.path, s));
    case SizeParse::too_large:
      fail(e.loc, fmt::format("{}: {} is out of range", e.path, s));
  }
}

void decode(const Entry& e, MemoryAmount& out) {
  // A plain number up to 1 is a share of the device (0.8 = 80%); anything else is a size.
  const std::string& s = scalar(e, "a size such as 20GiB, or a share of the device's memory in (0, 1]");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size() && v <= 1.0) {
    if (v < 0) fail(e.loc, fmt::format("{}: must be >= 0, got {}", e.path, s));
    out = MemoryAmount{};
    out.fraction = v;
    return;
  }
  out = MemoryAmount{};
  decode(e, Bytes<int64_t>{out.bytes});
}

void decode(const Entry& e, OptimizerPlace& out) {
  constexpr std::string_view what = "false, true (= ram), ram or nvme";
  const std::string& s = scalar(e, what);
  if (s == "ram") {
    out = OptimizerPlace::ram;
  } else if (s == "nvme") {
    out = OptimizerPlace::nvme;
  } else if (s == "none") {
    out = OptimizerPlace::none;
  } else {
    bool on = false;
    decode_bool_or(e, on, what);
    out = OptimizerPlace(on);
  }
}

void decode(const Entry& e, std::array<double, 2>& out) {
  constexpr std::string_view what = "a list of 2 numbers";
  if (e.is_map || !e.value().IsSequence() || e.value().size() != 2) expected(e, what);
  for (size_t i = 0; i < 2; ++i) {
    const Entry item = element(e, i);
    decode(item, out[i]);
  }
}

void decode(const Entry& e, std::map<std::string, std::string>& out) {
  if (!e.is_map && !e.value().IsNull()) expected(e, "a map of name: value");
  std::map<std::string, std::string> values;
  for (const Entry& child : e.children) {
    if (child.is_map || child.value().IsSequence()) expected(child, "a single value");
    decode(child, values[child.key]);
  }
  out = std::move(values);
}

}  // namespace frugal::config_detail
