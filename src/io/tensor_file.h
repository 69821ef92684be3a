// Private to src/io: save_tensors' format (tensor_io.h) written straight to a file, one tensor at
// a time, so that saving holds no more than one tensor's host copy at once (a device tensor is
// copied to the host when its turn comes), and with what a reader needs to read any part of
// one tensor back without the rest (checkpoint_file.h):
//   - where each tensor's bytes start in the file, its dtype and shape (the archive's index,
//     taken from the zip's own directory after writing);
//   - the FNV-1a hash of the whole file, and of every block of kBlockBytes bytes, so that a
//     range read verifies the blocks it touches and nothing else.
// The bytes are the same archive save_tensors makes (torch.load and load_tensors read it,
// sealed the same way).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "frugal/io/named_tensors.h"

namespace frugal::io::detail {

// Blocks of about 1/1024 of the file (a power of two, 4 KiB at least): a range read reads at
// most two blocks it does not need, a two-thousandth of the file, and a manifest lists about
// 1024 hashes per file (some 20 KB) whatever the file's size.
inline constexpr int64_t kBlocksPerFile = 1024;
inline constexpr int64_t kMinBlockBytes = 4096;
int64_t block_bytes_for(int64_t file_bytes);

struct TensorFileEntry {
  int64_t offset = 0;  // of the first byte, in the file
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;

  int64_t numel() const;
};

struct TensorFileSummary {
  int64_t bytes = 0;
  std::string fnv1a64;              // of the whole file
  int64_t block_bytes = kMinBlockBytes;
  std::vector<std::string> blocks;  // fnv1a64 of each block, the last one short
  std::vector<std::pair<std::string, TensorFileEntry>> tensors;
};

// Writes `named` (as save_tensors would) to `path`, fsynced; the checkpoint fault hooks
// (save_faults.h) apply. On failure the file is removed and a frugal::Error names it.
// block_bytes 0: block_bytes_for the tensors' bytes.
TensorFileSummary write_tensor_file(const std::filesystem::path& path, const NamedTensors& named,
                                    int64_t block_bytes = 0);

// As a manifest entry: {"bytes", "fnv1a64", "block_bytes", "blocks", "tensors": {name:
// {"offset", "dtype", "shape"}}}; and back, checked (offsets inside the file, one hash per
// block), every failure a frugal::Error naming `what`.
nlohmann::json summary_to_json(const TensorFileSummary& summary);
TensorFileSummary summary_from_json(const nlohmann::json& entry, const std::string& what);

}  // namespace frugal::io::detail
