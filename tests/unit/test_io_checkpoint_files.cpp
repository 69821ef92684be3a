// io/checkpoint_files.h: a checkpoint's tensor files written one tensor at a time are the very
// archives save_tensors makes (torch.load reads them), and read back whole or by element ranges
// reading only the blocks that hold them, each block verified against the manifest's hash; the
// resharding reader cuts ranges across shards, and reads checkpoints written before indexes.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/checkpoint_files.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

namespace fs = std::filesystem;
using namespace frugal;

namespace checkpoint_files_test {
namespace {

constexpr int64_t kBig = 1 << 20;  // 4 MiB of float32: blocks of 8 KiB (1/1024 of the file)

io::NamedTensors model_tensors() {
  at::manual_seed(3);
  at::Tensor wide = at::randn({8, 6});
  return {{"big", at::randn({kBig})},
          {"half", at::randn({7, 5}).to(at::kBFloat16)},
          {"ids", at::arange(11, at::kLong)},
          {"flags", at::rand({9}) > 0.5},
          {"view", wide.narrow(0, 2, 3)},  // a view: saved as its values
          {"transposed", wide.t()},        // not contiguous
          {"scalar", at::scalar_tensor(7.5)}};
}

fs::path write_whole(const fs::path& dir) {
  Checkpoint c;
  c.step = 4;
  c.model = model_tensors();
  c.state = {{"rng", at::arange(3, at::kLong)}};
  c.meta_json = "{}";
  return save_checkpoint(dir, c, 0);
}

}  // namespace

TEST_CASE("checkpoint tensor files are save_tensors' archives and read back by ranges",
          "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-files");
  const fs::path c = write_whole(dir.path());
  const io::NamedTensors want = model_tensors();
  // Byte for byte what save_tensors makes: the same archive, streamed.
  CHECK(test::read_text(c / "model.pt") == io::save_tensors(want));

  io::CheckpointFiles files(c);
  io::CheckpointFile& model = files.file("model.pt");
  REQUIRE(model.names().size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [name, t] = want[i];
    CHECK(model.names()[i] == name);  // the file's order
    CHECK(model.numel(name) == t.numel());
    const at::Tensor back = model.read(name);
    CHECK(back.sizes() == t.sizes());
    CHECK(back.scalar_type() == t.scalar_type());
    CHECK(at::equal(back, t.contiguous()));
  }
  const int64_t whole = files.bytes_read();
  const int64_t file_bytes = static_cast<int64_t>(fs::file_size(c / "model.pt"));
  CHECK(whole >= file_bytes - 8192);  // every tensor read: (nearly) every block, once
  CHECK(whole <= file_bytes);

  // A fresh reader, a small range in the middle of the 4 MiB tensor: one or two 8 KiB blocks.
  io::CheckpointFiles fresh(c);
  const at::Tensor big = want.front().second;
  for (const auto& [begin, count] : {std::pair<int64_t, int64_t>{500000, 100}, {kBig - 3, 3}, {0, 1}}) {
    const at::Tensor part = fresh.file("model.pt").read_range("big", begin, count);
    CHECK(at::equal(part, big.narrow(0, begin, count)));
  }
  CHECK(fresh.bytes_read() > 0);
  CHECK(fresh.bytes_read() <= 3 * 2 * 8192);
  CHECK_THROWS_WITH(fresh.file("model.pt").read_range("big", kBig - 2, 3),
                    Catch::Contains("elements [1048574, 1048577) of 'big' asked for, it has 1048576"));
  CHECK_THROWS_WITH(fresh.file("model.pt").read("nope"), Catch::Contains("holds no tensor 'nope'"));
}

TEST_CASE("a tensor file refuses what it cannot save and leaves no checkpoint",
          "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-files");
  Checkpoint c;
  c.step = 1;
  c.model = {{"w", at::ones({2})}, {"gone", at::Tensor()}};
  CHECK_THROWS_WITH(save_checkpoint(dir.path(), c, 0), "cannot save tensor 'gone': it is undefined");
  c.model = {{"w", at::ones({2})}, {"w", at::zeros({2})}};
  CHECK_THROWS_WITH(save_checkpoint(dir.path(), c, 0),
                    "cannot save tensors: the name 'w' appears twice");
  CHECK(list_checkpoints(dir.path()).empty());
}

TEST_CASE("a damaged block fails the reads that touch it and only those", "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-files");
  const fs::path c = write_whole(dir.path());
  const fs::path model = c / "model.pt";
  std::string bytes = test::read_text(model);
  // A byte of 'big' near element 525000 (its data starts in the first KiB of the file).
  const size_t at = bytes.size() / 2;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  test::write_text(model, bytes);

  io::CheckpointFiles files(c);
  io::CheckpointFile& f = files.file("model.pt");
  CHECK(at::equal(f.read_range("big", 0, 1000), model_tensors().front().second.narrow(0, 0, 1000)));
  CHECK_THROWS_WITH(f.read("big"), Catch::StartsWith(model.string() + ": corrupt (the hash of bytes"));
  CHECK_THROWS_WITH(verify_checkpoint(c),
                    model.string() + ": corrupt (content hash does not match the manifest)");
}

TEST_CASE("a shard's index is a listed file: damaged or lying, it is refused by name",
          "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-files");
  begin_sharded_checkpoint(dir.path(), 2);
  write_checkpoint_shard(dir.path(), 2, 0, 1, {{"u/param", at::arange(5000, at::kFloat)}});
  Checkpoint c;
  c.step = 2;
  c.meta_json = "{}";
  const fs::path ckpt = publish_sharded_checkpoint(dir.path(), c, 1, 0);
  const std::string shard = shard_file_name(0, 1);
  const fs::path index = ckpt / (shard + ".index.json");
  REQUIRE(fs::exists(index));
  {
    io::CheckpointFiles files(ckpt);
    CHECK(at::equal(files.file(shard).read_range("u/param", 4000, 10),
                    at::arange(4000, 4010, at::kFloat)));
  }
  SECTION("a byte of the index flipped") {
    std::string text = test::read_text(index);
    text[text.size() / 2] = static_cast<char>(text[text.size() / 2] ^ 1);
    test::write_text(index, text);
    io::CheckpointFiles files(ckpt);
    CHECK_THROWS_WITH(files.file(shard), index.string() + ": corrupt (content hash does not match the manifest)");
  }
  SECTION("an index whose tensor lies past the end of its file, rehashed to pass the manifest") {
    nlohmann::json j = nlohmann::json::parse(test::read_text(index));
    j["tensors"]["u/param"]["offset"] = j["bytes"].get<int64_t>() - 8;
    const std::string text = j.dump();
    test::write_text(index, text);
    nlohmann::json m = nlohmann::json::parse(test::read_text(ckpt / "manifest.json"));
    m["files"][shard + ".index.json"]["bytes"] = text.size();
    // The manifest's hash of the index, recomputed as the writer would (FNV-1a 64).
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char ch : text) h = (h ^ ch) * 0x100000001b3ULL;
    m["files"][shard + ".index.json"]["fnv1a64"] = fmt::format("{:016x}", h);
    test::write_text(ckpt / "manifest.json", m.dump());
    io::CheckpointFiles files(ckpt);
    CHECK_THROWS_WITH(files.file(shard),
                      Catch::Contains(index.string() + ": corrupt manifest (tensor 'u/param'") &&
                          Catch::Contains("lies outside the file's"));
  }
}

}  // namespace checkpoint_files_test

namespace checkpoint_files_test {
namespace {

// A zero checkpoint of world 2 holding one parameter "w" (10 elements) in flat buffer "u".
fs::path write_two_shards(const fs::path& dir) {
  begin_sharded_checkpoint(dir, 1);
  write_checkpoint_shard(dir, 1, 0, 2, {{"u/param", at::arange(0, 5, at::kFloat)}, {"rng.cpu", at::ones({2})}});
  write_checkpoint_shard(dir, 1, 1, 2, {{"u/param", at::arange(5, 10, at::kFloat)}, {"rng.cpu", at::zeros({2})}});
  Checkpoint c;
  c.step = 1;
  c.meta_json = R"({"step": 1, "sharding": {"mode": "zero3", "world_size": 2, "flats": [)"
                R"({"name": "u", "numel": 10, "names": ["w"], "shapes": [[10]], "offsets": [0]}]}})";
  return publish_sharded_checkpoint(dir, c, 2, 0);
}

}  // namespace

TEST_CASE("the resharding reader cuts any range across the shards, with or without indexes",
          "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-files");
  const fs::path c = write_two_shards(dir.path());
  auto check = [&] {
    dist::CheckpointReader reader(c, /*rank=*/1);
    CHECK(reader.saved_numel("param", "w") == 10);
    CHECK(reader.saved_numel("exp_avg", "w") == -1);
    CHECK(at::equal(reader.read_range("param", "w", 3, 4), at::arange(3, 7, at::kFloat)));
    CHECK(at::equal(reader.whole("param").at("w"), at::arange(10, at::kFloat)));
    REQUIRE(reader.rng_state().size() == 1);  // rank 1's own
    CHECK(at::equal(reader.rng_state().front().second, at::zeros({2})));
  };
  SECTION("as written: by the shards' indexes") { check(); }
  SECTION("as an older frugal wrote it: no index, each shard read whole") {
    nlohmann::json m = nlohmann::json::parse(test::read_text(c / "manifest.json"));
    for (int r = 0; r < 2; ++r) {
      const std::string shard = shard_file_name(r, 2);
      m["files"][shard].erase("index");
      m["files"].erase(shard + ".index.json");
      fs::remove(c / (shard + ".index.json"));
    }
    test::write_text(c / "manifest.json", m.dump());
    CHECK_NOTHROW(verify_checkpoint(c));
    check();
  }
}

TEST_CASE("verifying a checkpoint in parts: each reads about its share, together they find any "
          "damage",
          "[io][unit][checkpoint]") {
  test::TempDir dir("frugal-ckpt-verify-parts");
  const fs::path c = write_whole(dir.path());
  int64_t all = 0;
  for (const auto& e : fs::directory_iterator(c)) {
    if (e.path().filename() != "manifest.json") all += static_cast<int64_t>(e.file_size());
  }
  for (int parts : {2, 3, 4}) {
    INFO(parts << " parts");
    int64_t together = 0;
    for (int part = 0; part < parts; ++part) {
      const int64_t read = verify_checkpoint_part(c, part, parts);
      // model.pt (4 MiB) split by blocks; the small files whole, by turns.
      CHECK(read < all / parts + all / 50);
      together += read;
    }
    CHECK(together >= static_cast<int64_t>(fs::file_size(c / "model.pt")));
    CHECK(together < all + all / 100);
  }
  CHECK_THROWS_AS(verify_checkpoint_part(c, 2, 2), std::invalid_argument);

  // One flipped byte in model.pt's block at 70% of the file: only the part whose share holds
  // it says so, naming the file and the bytes; the others pass.
  const std::string original = test::read_text(c / "model.pt");
  const nlohmann::json index = nlohmann::json::parse(test::read_text(c / "manifest.json"))["files"]["model.pt"];
  const int64_t block = index["block_bytes"].get<int64_t>();
  const auto blocks = static_cast<int64_t>(index["blocks"].size());
  const int64_t flipped = blocks * 7 / 10, at = flipped * block + 100;
  REQUIRE(at < static_cast<int64_t>(original.size()));
  std::string damaged = original;
  damaged[static_cast<size_t>(at)] = static_cast<char>(damaged[static_cast<size_t>(at)] ^ 1);
  test::write_text(c / "model.pt", damaged);
  int failed = -1;
  for (int part = 0; part < 4; ++part) {
    try {
      verify_checkpoint_part(c, part, 4);
    } catch (const Error& e) {
      CHECK(failed == -1);
      failed = part;
      CHECK_THAT(e.what(), Catch::Contains((c / "model.pt").string() + ": corrupt (the hash of bytes " +
                                           std::to_string(flipped * block)));
    }
  }
  CHECK(failed == static_cast<int>(flipped * 4 / blocks));  // the part whose quarter holds it
  CHECK_THROWS_AS(verify_checkpoint(c), Error);
  // Cut short: every part sees the size.
  test::write_text(c / "model.pt", original.substr(0, original.size() - 1));
  for (int part = 0; part < 4; ++part) {
    CHECK_THROWS_WITH(verify_checkpoint_part(c, part, 4), Catch::Contains("truncated or altered"));
  }
}

}  // namespace checkpoint_files_test
