#include "frugal/io/disk_bandwidth.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "frugal/io/direct_io.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::io {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Block i's bytes: its index in every 8-byte word, so that a block read back from the wrong
// offset (or not at all) is told apart.
void fill_block(std::byte* data, int64_t bytes, int64_t index) {
  for (int64_t at = 0; at + 8 <= bytes; at += 8) {
    const uint64_t word = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull + at;
    std::memcpy(data + at, &word, 8);
  }
}

// Removes the scratch file however the measurement ends.
struct Scratch {
  fs::path path;
  ~Scratch() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

DiskBandwidth measure_disk(const fs::path& dir, int64_t bytes, int64_t block, int depth) {
  if (block <= 0 || block % kDirectAlignment != 0)
    throw Error(fmt::format("doctor --disk: the block must be a multiple of {} bytes, got {}",
                            kDirectAlignment, block));
  if (depth < 1) throw Error(fmt::format("doctor --disk: depth must be >= 1, got {}", depth));
  if (!fs::is_directory(dir))
    throw Error(fmt::format("doctor --disk: '{}' is not a folder", dir.string()));
  const int64_t blocks = std::max<int64_t>(1, (bytes + block - 1) / block);
  Scratch scratch{dir / fmt::format(".frugal-disk-probe-{}", ::getpid())};

  DiskBandwidth out;
  out.bytes = blocks * block;
  out.block = block;
  out.depth = depth;
  IoEngine engine(depth);
  out.backend = backend_name(engine.backend());
  out.fallback_reason = engine.fallback_reason();
  // One buffer per transfer in flight, each refilled when its last transfer is done.
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < depth; ++i) buffers.emplace_back(block);
  std::vector<uint64_t> tickets(depth, 0);

  {
    DirectFile file(scratch.path, DirectFile::Mode::write);
    out.direct = file.direct();
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < blocks; ++i) {
      const int slot = static_cast<int>(i % depth);
      if (tickets[slot]) engine.wait(tickets[slot]);
      fill_block(buffers[slot].data(), block, i);
      tickets[slot] = engine.write(file, buffers[slot].data(), block, i * block);
    }
    engine.wait_all();
    file.sync();
    out.write_bytes_per_s = static_cast<double>(out.bytes) / seconds_since(start);
  }
  {
    DirectFile file(scratch.path, DirectFile::Mode::read);
    std::fill(tickets.begin(), tickets.end(), 0);
    AlignedBuffer expected(block);
    auto check = [&](int64_t index, int slot) {
      fill_block(expected.data(), block, index);
      if (std::memcmp(expected.data(), buffers[slot].data(), static_cast<size_t>(block)) != 0)
        throw Error(fmt::format("doctor --disk: block {} of '{}' read back differs from what "
                                "was written",
                                index, scratch.path.string()));
    };
    std::vector<int64_t> index_of(depth, -1);
    const auto start = std::chrono::steady_clock::now();
    double checking = 0;  // time spent comparing, not reading
    for (int64_t i = 0; i < blocks; ++i) {
      const int slot = static_cast<int>(i % depth);
      if (tickets[slot]) {
        engine.wait(tickets[slot]);
        const auto c = std::chrono::steady_clock::now();
        check(index_of[slot], slot);
        checking += seconds_since(c);
      }
      index_of[slot] = i;
      tickets[slot] = engine.read(file, buffers[slot].data(), block, i * block);
    }
    for (int slot = 0; slot < depth; ++slot) {
      if (!tickets[slot]) continue;
      engine.wait(tickets[slot]);
      const auto c = std::chrono::steady_clock::now();
      check(index_of[slot], slot);
      checking += seconds_since(c);
    }
    out.read_bytes_per_s = static_cast<double>(out.bytes) / (seconds_since(start) - checking);
  }
  return out;
}

}  // namespace frugal::io
