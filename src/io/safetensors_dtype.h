// Private to src/io: safetensors dtype names <-> torch scalar types.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string_view>

namespace frugal::io::detail {

// nullopt for a torch type safetensors has no name for (e.g. complex128, quantized types).
std::optional<std::string_view> safetensors_dtype_name(c10::ScalarType type);

// nullopt for a name this build does not know.
std::optional<c10::ScalarType> safetensors_dtype_from_name(std::string_view name);

}  // namespace frugal::io::detail
