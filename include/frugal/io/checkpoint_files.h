// A checkpoint directory's tensor files (model.pt, optimizer.pt, state.pt, each rank's shard)
// read tensor by tensor, or by ranges of one tensor's elements, without reading the rest: the
// manifest lists where each tensor lies in its file and a hash of every block of the file, so a
// read takes only the blocks that hold what it asks for, and verifies each against its hash
// before using it (a damaged block is a frugal::Error naming the file). Resuming a sharded
// checkpoint under another layout reads this way only the byte ranges each rank keeps.
//
// Files written before the manifest had an index (older frugal versions) are read and verified
// whole, once, when first asked for.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace frugal::io {

class CheckpointFile {
 public:
  virtual ~CheckpointFile() = default;
  // The tensors' names, in the file's order.
  virtual const std::vector<std::string>& names() const = 0;
  virtual bool has(const std::string& name) const = 0;
  // The number of elements of a tensor the file holds (frugal::Error when it holds none of
  // that name).
  virtual int64_t numel(const std::string& name) const = 0;
  // Its shape and dtype, from the index (nothing read).
  virtual std::vector<int64_t> shape(const std::string& name) const = 0;
  virtual at::ScalarType dtype(const std::string& name) const = 0;
  // The whole tensor, in its shape, on the CPU.
  virtual at::Tensor read(const std::string& name) = 0;
  // Its elements [begin, begin + count), flattened, on the CPU.
  virtual at::Tensor read_range(const std::string& name, int64_t begin, int64_t count) = 0;
  // Where element `element` of a tensor lies in the file, in bytes: reading ranges in this
  // order reads each block once (0 for a file held whole in memory).
  virtual int64_t position(const std::string& name, int64_t element) const = 0;
  // Bytes this reader has read from the file.
  virtual int64_t bytes_read() const = 0;
};

class CheckpointFiles {
 public:
  // Reads the manifest (a frugal::Error when it is missing or damaged).
  explicit CheckpointFiles(std::filesystem::path checkpoint_dir);
  ~CheckpointFiles();
  CheckpointFiles(const CheckpointFiles&) = delete;
  CheckpointFiles& operator=(const CheckpointFiles&) = delete;

  // A file the manifest lists, opened when first asked for and kept.
  CheckpointFile& file(const std::string& name);
  bool lists(const std::string& name) const;
  // Bytes read from all files so far (shards' index files included).
  int64_t bytes_read() const;
  // The bytes of every file the manifest lists.
  int64_t total_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal::io
