// What the checkpoint targets (targets/checkpoint.cpp, targets/reshard.cpp) share: a small
// published checkpoint whose files an input replaces one at a time. Each file's bytes are kept
// to put back after the input, written as the seed corpus' valid inputs when asked, and a
// replaced file gets a manifest entry that matches it, so that its bytes reach the parser behind
// the integrity check rather than stopping at the hash.
#pragma once

#include <array>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "frugal/io/atomic_file.h"  // read_file
#include "frugal/io/hash.h"
#include "fuzz_input.h"

namespace frugal::fuzz {

// The checkpoint's `names` files, as bytes; with FRUGAL_FUZZ_SEEDS=<folder>, also written there
// as the valid inputs ("valid-NAME": the file's index as the first byte, then its bytes; the
// inputs fuzz/make_seeds.py collects).
template <size_t N>
std::array<std::string, N> keep_files(const std::filesystem::path& dir,
                                      const std::array<const char*, N>& names) {
  std::array<std::string, N> bytes;
  for (size_t i = 0; i < N; ++i) bytes[i] = frugal::io::read_file(dir / names[i]);
  if (const char* seeds = std::getenv("FRUGAL_FUZZ_SEEDS")) {
    for (size_t i = 0; i < N; ++i) {
      write_bytes(std::string(seeds) + "/valid-" + names[i],
                  std::string(1, static_cast<char>(i)) + bytes[i]);
    }
  }
  return bytes;
}

// `manifest` (manifest.json's text) with `name`'s entry describing `bytes`.
inline std::string manifest_with(const std::string& manifest, const std::string& name,
                                 std::string_view bytes) {
  nlohmann::json m = nlohmann::json::parse(manifest);
  m["files"][name] = {{"bytes", bytes.size()}, {"fnv1a64", frugal::io::fnv1a64_hex(bytes)}};
  return m.dump();
}

}  // namespace frugal::fuzz
