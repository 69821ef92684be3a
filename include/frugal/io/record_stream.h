// Records of a file streamed through a bounded ring of aligned host buffers, read, changed in
// place and written back: while record i is being changed, record i+1 is already being read and
// record i-1 is still being written. This is the shape of NVMe offload's host step (a group's
// fp32 masters and optimizer state read, stepped, written back), in the memory of `ring`
// records whatever the file's size (docs/strategies.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "frugal/io/direct_io.h"

namespace frugal::io {

class RecordStream {
 public:
  // Records of these sizes, back to back from offset 0, each padded to kDirectAlignment;
  // `ring` (>= 3) buffers of the largest record's size, in memory from `allocate` (empty:
  // torch's CPU allocator).
  RecordStream(std::vector<int64_t> record_bytes, int ring = 3, const HostAllocate& allocate = {});

  // Where each record starts in the file, and the file's length.
  int64_t offset(size_t record) const { return offsets_[record]; }
  int64_t file_bytes() const { return offsets_.back(); }
  size_t records() const { return bytes_.size(); }
  // Host memory the ring takes.
  int64_t buffer_bytes() const;

  // Calls change(i, data, bytes) for every record in order, with the record's bytes as read
  // from `file` (at least `bytes` long: its size padded up); what it leaves there is written
  // back to the same place. Reads run up to ring - 2 records ahead, writes drain behind, all
  // through `engine`. A failed transfer is a frugal::Error naming the file; a throwing `change`
  // stops the stream after the transfers in flight end (those written so far stay written).
  void for_each(IoEngine& engine, const DirectFile& file,
                const std::function<void(size_t, std::byte*, int64_t)>& change);

 private:
  std::vector<int64_t> bytes_;
  std::vector<int64_t> offsets_;  // records + 1 entries
  std::vector<AlignedBuffer> ring_;
};

}  // namespace frugal::io
