#include "frugal/io/record_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "frugal/util/error.h"

namespace frugal::io {

RecordStream::RecordStream(std::vector<int64_t> record_bytes, int ring, const HostAllocate& allocate)
    : bytes_(std::move(record_bytes)) {
  if (ring < 3) throw Error(fmt::format("record stream: ring must be >= 3, got {}", ring));
  int64_t largest = 0;
  offsets_.push_back(0);
  for (int64_t b : bytes_) {
    if (b <= 0) throw Error(fmt::format("record stream: a record of {} bytes", b));
    offsets_.push_back(offsets_.back() + direct_aligned(b));
    largest = std::max(largest, direct_aligned(b));
  }
  for (int i = 0; i < ring; ++i) ring_.emplace_back(largest, allocate);
}

int64_t RecordStream::buffer_bytes() const {
  int64_t total = 0;
  for (const auto& b : ring_) total += b.size();
  return total;
}

void RecordStream::for_each(IoEngine& engine, const DirectFile& file,
                            const std::function<void(size_t, std::byte*, int64_t)>& change) {
  const size_t n = bytes_.size();
  const size_t slots = ring_.size();
  // Reads run `ahead` records ahead: record i+ahead goes into the slot record i-2 used, whose
  // write had all of record i-1's change to finish.
  const size_t ahead = slots - 2;
  std::vector<uint64_t> reading(slots, 0), writing(slots, 0);
  auto padded = [&](size_t i) { return offsets_[i + 1] - offsets_[i]; };
  auto start_read = [&](size_t j) {
    const size_t s = j % slots;
    if (writing[s]) engine.wait(std::exchange(writing[s], 0));
    reading[s] = engine.read(file, ring_[s].data(), padded(j), offsets_[j]);
  };
  try {
    for (size_t j = 0; j < std::min(ahead, n); ++j) start_read(j);
    for (size_t i = 0; i < n; ++i) {
      if (i + ahead < n) start_read(i + ahead);
      const size_t s = i % slots;
      engine.wait(std::exchange(reading[s], 0));
      change(i, ring_[s].data(), bytes_[i]);
      writing[s] = engine.write(file, ring_[s].data(), padded(i), offsets_[i]);
    }
    for (uint64_t& t : writing)
      if (t) engine.wait(std::exchange(t, 0));
  } catch (...) {
    // Nothing may still be moving into or out of the ring when this returns.
    for (size_t s = 0; s < slots; ++s) {
      for (uint64_t* t : {&reading[s], &writing[s]}) {
        if (!*t) continue;
        try {
          engine.wait(std::exchange(*t, 0));
        } catch (const std::exception&) {
        }
      }
    }
    throw;
  }
}

}  // namespace frugal::io
