// 64-bit FNV-1a: a cheap, stable content hash for integrity checks (checkpoint manifests,
// tensor checksums). It detects corruption (truncation, flipped bytes), not tampering.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace frugal::io {

inline constexpr std::uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;

// The raw state, for content that comes in pieces: feed each piece the state the previous one
// returned, so fnv1a64(b, fnv1a64(a)) == fnv1a64(a + b).
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t state = kFnv1a64Offset);

// Two running hashes of the same bytes (a whole file's and one block's) in one pass: FNV-1a is
// bound by its multiply's latency, so the second chain is nearly free (256 MiB: 0.31 s for
// both, 0.62 s in two passes, on the development machine).
void fnv1a64_both(std::string_view bytes, std::uint64_t& first, std::uint64_t& second);

// 16 lowercase hex digits, zero-padded ("af63dc4c8601ec8c" for "a").
std::string hex64(std::uint64_t value);

inline std::string fnv1a64_hex(std::string_view bytes) { return hex64(fnv1a64(bytes)); }

}  // namespace frugal::io
