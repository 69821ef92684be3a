#include "safetensors_dtype.h"

#include <array>
#include <utility>

namespace frugal::io::detail {
namespace {

// The names the safetensors specification (and its Python package) uses.
constexpr std::array<std::pair<std::string_view, c10::ScalarType>, 18> kTable{{
    {"F64", c10::kDouble},
    {"F32", c10::kFloat},
    {"F16", c10::kHalf},
    {"BF16", c10::kBFloat16},
    {"I64", c10::kLong},
    {"I32", c10::kInt},
    {"I16", c10::kShort},
    {"I8", c10::kChar},
    {"U64", c10::kUInt64},
    {"U32", c10::kUInt32},
    {"U16", c10::kUInt16},
    {"U8", c10::kByte},
    {"BOOL", c10::kBool},
    {"F8_E4M3", c10::kFloat8_e4m3fn},
    {"F8_E5M2", c10::kFloat8_e5m2},
    {"F8_E4M3FNUZ", c10::kFloat8_e4m3fnuz},
    {"F8_E5M2FNUZ", c10::kFloat8_e5m2fnuz},
    {"C64", c10::kComplexFloat},
}};

}  // namespace

std::optional<std::string_view> safetensors_dtype_name(c10::ScalarType type) {
  for (const auto& [name, t] : kTable) {
    if (t == type) return name;
  }
  return std::nullopt;
}

std::optional<c10::ScalarType> safetensors_dtype_from_name(std::string_view name) {
  for (const auto& [n, type] : kTable) {
    if (n == name) return type;
  }
  return std::nullopt;
}

}  // namespace frugal::io::detail
