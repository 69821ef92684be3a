// Direct I/O (frugal/io/direct_io.h) through io_uring and through the thread-pool fallback:
// the same bytes come back from where they were written, with many transfers in flight and
// completed out of order; misaligned transfers, reads past the end and unopenable files are
// one-line errors; doctor --disk's measurement reads back what it wrote and cleans up; an
// unnamed file (the NVMe offload's scratch) never shows in its folder.
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "frugal/io/direct_io.h"
#include "frugal/io/disk_bandwidth.h"
#include "frugal/io/record_stream.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;
using io::AlignedBuffer;
using io::DirectFile;
using io::IoEngine;
using io::kDirectAlignment;

namespace test_direct_io {

// Writes `blocks` blocks of random bytes (each 1 to 3 alignment units, `depth` in flight)
// to a new file, then reads them back in reverse order and compares.
void round_trip(IoEngine& engine, const std::filesystem::path& path, int blocks) {
  std::mt19937 rng(7);
  std::vector<AlignedBuffer> written, read;
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (int i = 0; i < blocks; ++i) {
    const int64_t bytes = kDirectAlignment * (1 + static_cast<int64_t>(rng() % 3));
    written.emplace_back(bytes);
    for (int64_t b = 0; b < bytes; ++b) written.back().data()[b] = std::byte(rng() & 0xff);
    offsets.push_back(at);
    at += bytes;
  }
  {
    DirectFile file(path, DirectFile::Mode::write);
    CHECK(file.direct());
    std::vector<uint64_t> tickets;
    for (int i = 0; i < blocks; ++i)
      tickets.push_back(engine.write(file, written[i].data(), written[i].size(), offsets[i]));
    // Waited for newest first: completions are matched by ticket, not by order.
    for (auto t = tickets.rbegin(); t != tickets.rend(); ++t) engine.wait(*t);
    file.sync();
  }
  CHECK(static_cast<int64_t>(std::filesystem::file_size(path)) == at);
  DirectFile file(path, DirectFile::Mode::read);
  for (int i = blocks - 1; i >= 0; --i) read.emplace_back(written[i].size());
  for (int i = blocks - 1; i >= 0; --i)
    engine.read(file, read[blocks - 1 - i].data(), written[i].size(), offsets[i]);
  CHECK(engine.in_flight() == blocks);
  engine.wait_all();
  CHECK(engine.in_flight() == 0);
  for (int i = 0; i < blocks; ++i) {
    INFO("block " << i);
    CHECK(std::memcmp(read[blocks - 1 - i].data(), written[i].data(), written[i].size()) == 0);
  }
}

}  // namespace test_direct_io

using namespace test_direct_io;

TEST_CASE("direct I/O through io_uring and through threads returns what was written",
          "[unit][io]") {
  test::TempDir dir("frugal-direct-io");
  {
    IoEngine engine(4);
    // This machine's kernel allows io_uring; where one does not, the fallback says why.
    INFO("fallback: " << engine.fallback_reason());
    CHECK(engine.backend() == IoEngine::Backend::io_uring);
    CHECK(engine.fallback_reason().empty());
    round_trip(engine, dir / "uring.bin", 40);
  }
  {
    IoEngine engine(3, IoEngine::Backend::threads);
    CHECK(engine.backend() == IoEngine::Backend::threads);
    round_trip(engine, dir / "threads.bin", 40);
  }
  // FRUGAL_IO_BACKEND=threads forces the fallback for every engine.
  ::setenv("FRUGAL_IO_BACKEND", "threads", 1);
  {
    IoEngine engine(2);
    CHECK(engine.backend() == IoEngine::Backend::threads);
    round_trip(engine, dir / "forced.bin", 5);
  }
  ::unsetenv("FRUGAL_IO_BACKEND");
}

TEST_CASE("direct I/O refuses misaligned transfers and names the file of a failed one",
          "[unit][io][bad_input]") {
  test::TempDir dir("frugal-direct-io-errors");
  for (auto backend : {IoEngine::Backend::io_uring, IoEngine::Backend::threads}) {
    INFO(io::backend_name(backend));
    IoEngine engine(2, backend);
    AlignedBuffer buffer(2 * kDirectAlignment);
    const std::filesystem::path path = dir / fmt::format("{}.bin", io::backend_name(backend));
    {
      DirectFile file(path, DirectFile::Mode::write);
      CHECK_THROWS_WITH(engine.write(file, buffer.data() + 1, kDirectAlignment, 0),
                        Catch::Contains("must be aligned to 4096"));
      CHECK_THROWS_WITH(engine.write(file, buffer.data(), 100, 0),
                        Catch::Contains("must be aligned to 4096"));
      CHECK_THROWS_WITH(engine.write(file, buffer.data(), kDirectAlignment, 512),
                        Catch::Contains("must be aligned to 4096"));
      CHECK(engine.in_flight() == 0);
      engine.wait(engine.write(file, buffer.data(), kDirectAlignment, 0));
    }
    // A read past the end stops short: an error naming the file, the offset and why.
    DirectFile file(path, DirectFile::Mode::read);
    const uint64_t t = engine.read(file, buffer.data(), 2 * kDirectAlignment, 0);
    CHECK_THROWS_WITH(engine.wait(t), Catch::Contains(path.string()) &&
                                          Catch::Contains("at offset 0 stopped after 4096 bytes") &&
                                          Catch::Contains("the file ends there"));
    CHECK(engine.in_flight() == 0);
  }
  CHECK_THROWS_WITH(DirectFile(dir / "no" / "such.bin", DirectFile::Mode::write),
                    Catch::Contains("such.bin: cannot open for writing: No such file"));
  CHECK_THROWS_WITH(DirectFile(dir / "missing.bin", DirectFile::Mode::read),
                    Catch::Contains("missing.bin: cannot open for reading"));
}

TEST_CASE("doctor --disk measures a folder's direct-I/O bandwidth and leaves nothing behind",
          "[unit][io]") {
  test::TempDir dir("frugal-disk-probe");
  const io::DiskBandwidth d = io::measure_disk(dir.path(), 5 << 20, 1 << 20, 4);
  CHECK(d.bytes == 5 << 20);
  CHECK(d.block == 1 << 20);
  CHECK(d.depth == 4);
  CHECK(d.direct);
  CHECK(d.backend == "io_uring");
  CHECK(d.write_bytes_per_s > 0);
  CHECK(d.read_bytes_per_s > 0);
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK_THROWS_WITH(io::measure_disk(dir / "absent", 1 << 20),
                    Catch::Contains("absent' is not a folder"));
  CHECK_THROWS_WITH(io::measure_disk(dir.path(), 1 << 20, 1000),
                    Catch::Contains("multiple of 4096"));
}

TEST_CASE("direct I/O on a filesystem without O_DIRECT falls back and a full disk is one error",
          "[unit][io][bad_input]") {
  test::TempDir dir("frugal-direct-io-faults");
  // (test hooks in src/io/direct_io.cpp; unset below: the file's other cases share the process)
  ::setenv("FRUGAL_FAULT_NO_ODIRECT", "1", 1);
  {
    DirectFile cached(dir / "cached.bin", DirectFile::Mode::write);
    CHECK_FALSE(cached.direct());
    IoEngine engine(2);
    AlignedBuffer buffer(kDirectAlignment);
    buffer.data()[7] = std::byte{42};
    engine.wait(engine.write(cached, buffer.data(), kDirectAlignment, 0));
    CHECK(std::filesystem::file_size(dir / "cached.bin") == kDirectAlignment);
    CHECK_THROWS_WITH(DirectFile(dir / "strict.bin", DirectFile::Mode::write, true),
                      Catch::Contains("strict.bin: the filesystem refuses direct I/O (O_DIRECT)"));
    const io::DiskBandwidth d = io::measure_disk(dir.path(), 1 << 20, 1 << 20, 1);
    CHECK_FALSE(d.direct);
  }
  ::unsetenv("FRUGAL_FAULT_NO_ODIRECT");

  // The disk fills after 3 blocks: the fourth write fails, naming the file and the reason, and
  // the others are unaffected.
  ::setenv("FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES", std::to_string(3 * kDirectAlignment).c_str(),
           1);
  IoEngine engine(4);
  DirectFile file(dir / "full.bin", DirectFile::Mode::write);
  AlignedBuffer buffer(kDirectAlignment);
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 4; ++i)
    tickets.push_back(engine.write(file, buffer.data(), kDirectAlignment, i * kDirectAlignment));
  for (int i = 0; i < 3; ++i) engine.wait(tickets[i]);
  CHECK_THROWS_WITH(engine.wait(tickets[3]),
                    Catch::Contains("full.bin: write of 4096 bytes at offset 12288 failed: No "
                                    "space left on device"));
  CHECK(engine.in_flight() == 0);
  ::unsetenv("FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES");
}

TEST_CASE("an unnamed direct file holds what is written and leaves no name in its folder",
          "[unit][io]") {
  test::TempDir dir("frugal-direct-io-unnamed");
  IoEngine engine(2);
  AlignedBuffer written(2 * kDirectAlignment), read(2 * kDirectAlignment);
  for (int64_t b = 0; b < written.size(); ++b) written.data()[b] = std::byte((b * 7) & 0xff);
  {
    const DirectFile file = DirectFile::unnamed(dir.path(), "scratch");
    CHECK(file.direct());
    CHECK(file.path() == dir / "scratch");  // (what messages call it)
    // Where the folder's filesystem has unnamed files, the file never had a name (the
    // fallback's name would show in its descriptor's link: ".../scratch.PID.0 (deleted)").
    const int probe = ::open(dir.path().c_str(), O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
    if (probe >= 0) {
      ::close(probe);
      const auto link = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(file.fd()));
      CHECK_THAT(link.string(), !Catch::Contains("scratch."));
    }
    engine.wait(engine.write(file, written.data(), written.size(), 0));
    engine.wait(engine.read(file, read.data(), read.size(), 0));
    CHECK(std::memcmp(read.data(), written.data(), written.size()) == 0);
    CHECK(std::filesystem::is_empty(dir.path()));  // a kill now would leave nothing either
  }
  CHECK(std::filesystem::is_empty(dir.path()));

  ::setenv("FRUGAL_FAULT_NO_ODIRECT", "1", 1);  // (unset below, as in the case above)
  CHECK_FALSE(DirectFile::unnamed(dir.path(), "scratch").direct());
  CHECK_THROWS_WITH(DirectFile::unnamed(dir.path(), "strict", true),
                    Catch::Contains("strict: the filesystem refuses direct I/O (O_DIRECT)"));
  ::unsetenv("FRUGAL_FAULT_NO_ODIRECT");
  CHECK_THROWS_WITH(DirectFile::unnamed(dir / "missing", "scratch"),
                    Catch::Contains("missing/scratch: cannot open for writing: No such file or "
                                    "directory"));
  CHECK(std::filesystem::is_empty(dir.path()));
}

namespace test_direct_io {

// Record i's expected byte b before any change: (31 i + b) mod 256, padding zero.
std::byte record_byte(size_t i, int64_t b) { return std::byte((31 * i + b) & 0xff); }

// A new file at `path` holding each record's bytes at the stream's offsets.
void write_records(IoEngine& engine, const std::filesystem::path& path,
                   const std::vector<int64_t>& sizes, const io::RecordStream& stream) {
  DirectFile file(path, DirectFile::Mode::write);
  for (size_t i = 0; i < sizes.size(); ++i) {
    AlignedBuffer b(sizes[i]);
    for (int64_t k = 0; k < sizes[i]; ++k) b.data()[k] = record_byte(i, k);
    engine.wait(engine.write(file, b.data(), b.size(), stream.offset(i)));
  }
}

}  // namespace test_direct_io

TEST_CASE("a record stream's ring lies in memory the caller gives, aligned inside it",
          "[unit][io]") {
  // What NVMe offload on CUDA does with page-locked memory: here plain vectors, handed out one
  // byte past an alignment so that the buffer must align itself inside.
  test::TempDir dir("frugal-record-ring");
  const std::vector<int64_t> sizes = {5000, 12000, 100};
  std::vector<std::pair<const std::byte*, int64_t>> given;
  io::HostAllocate allocate = [&](int64_t bytes) {
    auto block = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(bytes + kDirectAlignment + 1));
    auto at = reinterpret_cast<uintptr_t>(block->data());
    std::byte* data = block->data() + (kDirectAlignment - at % kDirectAlignment) % kDirectAlignment + 1;
    given.emplace_back(data, bytes);
    return io::HostBlock{block, data};
  };
  io::RecordStream stream(sizes, 3, allocate);
  REQUIRE(given.size() == 3);
  for (const auto& g : given) CHECK(g.second >= 12288 + kDirectAlignment);
  CHECK(stream.buffer_bytes() == 3 * 12288);
  IoEngine engine(4, IoEngine::Backend::threads);
  const std::filesystem::path path = dir / "ring.bin";
  write_records(engine, path, sizes, stream);
  DirectFile file(path, DirectFile::Mode::update);
  stream.for_each(engine, file, [&](size_t i, std::byte* data, int64_t bytes) {
    INFO("record " << i);
    CHECK(reinterpret_cast<uintptr_t>(data) % kDirectAlignment == 0);
    bool inside = false;
    for (const auto& [at, room] : given) inside = inside || (data >= at && data + bytes <= at + room);
    CHECK(inside);
    bool as_written = true;
    for (int64_t k = 0; k < bytes; ++k) as_written = as_written && data[k] == record_byte(i, k);
    CHECK(as_written);
  });
}

TEST_CASE("a record stream reads each record while the previous is changed and written back",
          "[unit][io]") {
  test::TempDir dir("frugal-record-stream");
  const std::vector<int64_t> sizes = {5000, 4096, 12000, 100, 8192, 3000, 4096};
  for (auto backend : {IoEngine::Backend::io_uring, IoEngine::Backend::threads}) {
    INFO(io::backend_name(backend));
    io::RecordStream stream(sizes, 3);
    // Three buffers of the largest record (12000 bytes padded to 12288), whatever the file.
    CHECK(stream.buffer_bytes() == 3 * 12288);
    CHECK(stream.file_bytes() == 8192 + 4096 + 12288 + 4096 + 8192 + 4096 + 4096);
    IoEngine engine(4, backend);
    const std::filesystem::path path = dir / fmt::format("{}.bin", io::backend_name(backend));
    write_records(engine, path, sizes, stream);
    DirectFile file(path, DirectFile::Mode::update);
    std::vector<int64_t> in_flight_seen;
    stream.for_each(engine, file, [&](size_t i, std::byte* data, int64_t bytes) {
      INFO("record " << i);
      REQUIRE(bytes == sizes[i]);
      bool as_written = true;
      for (int64_t k = 0; k < bytes; ++k) as_written = as_written && data[k] == record_byte(i, k);
      CHECK(as_written);
      // Not yet waited for while record i changes: record i+1's read and record i-1's write (the
      // last record: the two writes before it).
      in_flight_seen.push_back(engine.in_flight());
      for (int64_t k = 0; k < bytes; ++k) data[k] = std::byte(uint8_t(data[k]) + 1);
    });
    CHECK(in_flight_seen == std::vector<int64_t>{1, 2, 2, 2, 2, 2, 2});
    CHECK(engine.in_flight() == 0);
    // Every record came back changed, in its place; padding untouched.
    for (size_t i = 0; i < sizes.size(); ++i) {
      AlignedBuffer b(sizes[i]);
      engine.wait(engine.read(file, b.data(), b.size(), stream.offset(i)));
      bool changed = true;
      for (int64_t k = 0; k < sizes[i]; ++k)
        changed = changed && b.data()[k] == std::byte(uint8_t(record_byte(i, k)) + 1);
      for (int64_t k = sizes[i]; k < b.size(); ++k)
        changed = changed && b.data()[k] == std::byte{0};
      INFO("record " << i);
      CHECK(changed);
    }
    // A change that throws stops the stream with nothing left in flight; the records before it
    // stay written.
    CHECK_THROWS_WITH(stream.for_each(engine, file,
                                      [](size_t i, std::byte* data, int64_t) {
                                        if (i == 3) throw Error("record 3 refused");
                                        data[0] = std::byte{0xEE};
                                      }),
                      Catch::Contains("record 3 refused"));
    CHECK(engine.in_flight() == 0);
    for (size_t i = 0; i < sizes.size(); ++i) {
      AlignedBuffer b(sizes[i]);
      engine.wait(engine.read(file, b.data(), b.size(), stream.offset(i)));
      INFO("record " << i);
      CHECK((b.data()[0] == std::byte{0xEE}) == (i < 3));
    }
  }
  CHECK_THROWS_WITH(io::RecordStream({4096}, 2), Catch::Contains("ring must be >= 3"));
}
