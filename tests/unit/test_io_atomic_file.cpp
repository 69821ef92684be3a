#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "frugal/io/atomic_file.h"
#include "frugal/io/hash.h"
#include "frugal/io/remove_tree.h"
#include "frugal/util/error.h"
#include "support/io_files.h"

using frugal::io::test::ScratchDir;
namespace fs = std::filesystem;
namespace io = frugal::io;

namespace {

// Makes write(2) fail with EFBIG past `bytes` for the current scope: a real I/O failure in the
// middle of a write, without needing a full disk. SIGXFSZ would kill the process; ignore it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("write_file_atomic writes the bytes and leaves no temp file", "[io][unit]") {
  ScratchDir dir;
  std::string bytes("header\0binary\xff", 14);
  io::write_file_atomic(dir / "a.bin", bytes);
  CHECK(io::read_file(dir / "a.bin") == bytes);
  CHECK(dir.list() == std::vector<std::string>{"a.bin"});

  io::write_file_atomic(dir / "empty", "");
  CHECK(io::read_file(dir / "empty").empty());
}

TEST_CASE("write_file_atomic replaces an existing file", "[io][unit]") {
  ScratchDir dir;
  io::write_file_atomic(dir / "f.txt", "old content, longer than the new one");
  io::write_file_atomic(dir / "f.txt", "new");
  CHECK(io::read_file(dir / "f.txt") == "new");
  CHECK(dir.list() == std::vector<std::string>{"f.txt"});
}

TEST_CASE("write_file_atomic_parts writes the pieces in order", "[io][unit]") {
  ScratchDir dir;
  io::write_file_atomic_parts(dir / "p", {"ab", "", "cde"});
  CHECK(io::read_file(dir / "p") == "abcde");
}

TEST_CASE("a failed write keeps the old file and removes its temp file", "[io][unit]") {
  ScratchDir dir;
  io::write_file_atomic(dir / "keep.txt", "precious");
  std::string big(64 * 1024, 'x');
  {
    FileSizeLimit limit(4096);
    REQUIRE_THROWS_WITH(io::write_file_atomic(dir / "keep.txt", big),
                        Catch::Contains("cannot write '" + (dir / "keep.txt").string() + "'") &&
                            Catch::Contains("File too large"));
  }
  CHECK(io::read_file(dir / "keep.txt") == "precious");
  CHECK(dir.list() == std::vector<std::string>{"keep.txt"});
}

TEST_CASE("write_file_atomic reports a failed rename and cleans up", "[io][unit]") {
  ScratchDir dir;
  fs::create_directories(dir / "target" / "inside");  // a non-empty directory can't be replaced
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "target", "x"),
                    Catch::StartsWith("cannot write '" + (dir / "target").string() + "': "));
  CHECK(dir.list() == std::vector<std::string>{"target"});
  CHECK(fs::is_directory(dir / "target" / "inside"));
}

TEST_CASE("read_file names the path and the reason", "[io][unit]") {
  ScratchDir dir;
  fs::path missing = dir / "missing.txt";
  CHECK_THROWS_WITH(io::read_file(missing),
                    "cannot read '" + missing.string() + "': No such file or directory");
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "no" / "such" / "dir.txt", "x"),
                    Catch::EndsWith("No such file or directory"));
  CHECK_THROWS_AS(io::fsync_directory(dir / "nope"), frugal::Error);
  io::fsync_directory(dir.path());
}

TEST_CASE("publish_directory_atomic renames a complete directory into place", "[io][unit]") {
  ScratchDir dir;
  fs::path tmp = dir / "step-10.tmp";
  fs::create_directories(tmp / "shards");
  io::write_file_atomic(tmp / "model.bin", "weights");
  io::write_file_atomic(tmp / "shards" / "0.bin", "shard");
  io::publish_directory_atomic(tmp, dir / "step-10");
  CHECK(dir.list() == std::vector<std::string>{"step-10"});
  CHECK(io::read_file(dir / "step-10" / "model.bin") == "weights");
  CHECK(io::read_file(dir / "step-10" / "shards" / "0.bin") == "shard");
}

TEST_CASE("publish_directory_atomic refuses an existing target", "[io][unit]") {
  ScratchDir dir;
  fs::path tmp = dir / "new.tmp";
  fs::create_directories(tmp);
  io::write_file_atomic(tmp / "a", "1");
  // An empty directory is the case plain rename(2) would silently replace.
  fs::create_directories(dir / "empty");
  io::write_file_atomic(dir / "file", "2");
  for (const char* target : {"empty", "file"}) {
    CHECK_THROWS_WITH(io::publish_directory_atomic(tmp, dir / target),
                      Catch::Contains("already exists"));
  }
  CHECK(io::read_file(tmp / "a") == "1");
  CHECK(fs::is_empty(dir / "empty"));
  CHECK_THROWS_WITH(io::publish_directory_atomic(dir / "missing.tmp", dir / "x"),
                    Catch::Contains("not a directory"));
}

TEST_CASE("fnv1a64 matches the reference vectors and hashes in pieces", "[io][unit]") {
  // Reference values of 64-bit FNV-1a (Fowler/Noll/Vo test suite).
  CHECK(io::fnv1a64_hex("") == "cbf29ce484222325");
  CHECK(io::fnv1a64_hex("a") == "af63dc4c8601ec8c");
  CHECK(io::fnv1a64_hex("foobar") == "85944171f73967e8");
  CHECK(io::fnv1a64("bar", io::fnv1a64("foo")) == io::fnv1a64("foobar"));
  CHECK(io::hex64(0x1) == "0000000000000001");
  // Two running hashes in one pass: a file's so far ("foo") and a new block's.
  std::uint64_t file = io::fnv1a64("foo"), block = io::kFnv1a64Offset;
  io::fnv1a64_both("bar", file, block);
  CHECK(file == io::fnv1a64("foobar"));
  CHECK(block == io::fnv1a64("bar"));
}

TEST_CASE("remove_tree deletes a directory tree without following symlinks", "[io][unit]") {
  ScratchDir dir;
  fs::create_directories(dir / "outside");
  io::write_file_atomic(dir / "outside" / "keep", "k");
  fs::create_directories(dir / "tree" / "a" / "b");
  io::write_file_atomic(dir / "tree" / "a" / "b" / "f", "x");
  io::write_file_atomic(dir / "tree" / "g", "y");
  fs::create_directory_symlink(dir / "outside", dir / "tree" / "link");
  io::remove_tree(dir / "tree");
  CHECK(dir.list() == std::vector<std::string>{"outside"});
  CHECK(io::read_file(dir / "outside" / "keep") == "k");
  io::remove_tree(dir / "tree");              // already gone: fine
  io::remove_tree(dir / "outside" / "keep");  // a plain file
  CHECK(fs::is_empty(dir / "outside"));
}
