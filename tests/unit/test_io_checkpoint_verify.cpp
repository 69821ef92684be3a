// verify_checkpoint and newest_valid_checkpoint: what run.resume: auto trusts. A checkpoint is
// valid only when its manifest is whole, lists every file its kind needs (every rank's shard of a
// sharded one) and every listed file has the listed size and hash.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "frugal/io/checkpoint.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

namespace fs = std::filesystem;
using namespace frugal;

namespace checkpoint_verify {
namespace {

io::NamedTensors tensors(float base) { return {{"w", at::arange(6).to(at::kFloat) + base}}; }

// A sharded checkpoint of world 2 at `step`, written as a job's ranks write one.
fs::path write_sharded(const fs::path& dir, int64_t step) {
  begin_sharded_checkpoint(dir, step);
  write_checkpoint_shard(dir, step, 0, 2, tensors(0));
  write_checkpoint_shard(dir, step, 1, 2, tensors(10));
  Checkpoint c;
  c.step = step;
  c.model = tensors(20);
  c.state = tensors(30);
  c.meta_json = "{}";
  return publish_sharded_checkpoint(dir, c, 2, 0);
}

void edit_manifest(const fs::path& ckpt, void (*edit)(nlohmann::json&)) {
  nlohmann::json m = nlohmann::json::parse(test::read_text(ckpt / "manifest.json"));
  edit(m);
  test::write_text(ckpt / "manifest.json", m.dump());
}

}  // namespace

TEST_CASE("verify_checkpoint checks every shard a sharded checkpoint lists, naming the bad one",
          "[io][reliability]") {
  test::TempDir dir("frugal-verify");
  const fs::path c = write_sharded(dir.path(), 2);
  CHECK_NOTHROW(verify_checkpoint(c));
  const fs::path shard1 = c / shard_file_name(1, 2);

  SECTION("a shard missing") {
    fs::remove(shard1);
    CHECK_THROWS_WITH(verify_checkpoint(c),
                      "cannot read '" + shard1.string() + "': No such file or directory");
  }
  SECTION("a shard's byte flipped") {
    std::string b = test::read_text(shard1);
    b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 1);
    test::write_text(shard1, b);
    CHECK_THROWS_WITH(verify_checkpoint(c),
                      shard1.string() + ": corrupt (content hash does not match the manifest)");
  }
  SECTION("a shard left out of the manifest") {
    edit_manifest(c, [](nlohmann::json& m) { m["files"].erase("shard-00001-of-00002.pt"); });
    CHECK_THROWS_WITH(verify_checkpoint(c), (c / "manifest.json").string() +
                                                ": manifest does not list 'shard-00001-of-00002.pt'");
  }
  SECTION("a manifest entry of the wrong type") {
    edit_manifest(c, [](nlohmann::json& m) { m["files"]["model.pt"]["bytes"] = "many"; });
    CHECK_THROWS_WITH(verify_checkpoint(c), (c / "manifest.json").string() +
                                                ": corrupt manifest (the entry of 'model.pt')");
    CHECK_THROWS_AS(load_checkpoint(c), Error);
  }
  SECTION("a world size past the files listed (before: a name per rank, 2^31 of them)") {
    edit_manifest(c, [](nlohmann::json& m) { m["sharded"]["world_size"] = int64_t{1} << 31; });
    CHECK_THROWS_WITH(verify_checkpoint(c),
                      Catch::StartsWith((c / "manifest.json").string() +
                                        ": sharded with world_size 2147483648 ("));
    CHECK_THROWS_AS(load_checkpoint(c), Error);
  }
  SECTION("a manifest cut short") {
    std::string m = test::read_text(c / "manifest.json");
    test::write_text(c / "manifest.json", m.substr(0, m.size() / 2));
    CHECK_THROWS_WITH(verify_checkpoint(c),
                      Catch::StartsWith((c / "manifest.json").string() + ": corrupt manifest ("));
  }
}

TEST_CASE("newest_valid_checkpoint skips damaged newer checkpoints and says why",
          "[io][reliability]") {
  test::TempDir dir("frugal-newest-valid");
  const fs::path c2 = write_sharded(dir.path(), 2);
  const fs::path c4 = write_sharded(dir.path(), 4);
  const fs::path c6 = write_sharded(dir.path(), 6);
  CHECK(newest_valid_checkpoint(dir.path()) == c6);
  fs::remove(c6 / "model.pt");
  std::string b = test::read_text(c4 / "state.pt");
  test::write_text(c4 / "state.pt", b.substr(0, b.size() - 1));
  RejectedCheckpoints rejected;
  CHECK(newest_valid_checkpoint(dir.path(), &rejected) == c2);
  REQUIRE(rejected.size() == 2);
  CHECK(rejected[0].first == c6);
  CHECK_THAT(rejected[0].second, Catch::Contains((c6 / "model.pt").string()));
  CHECK(rejected[1].first == c4);
  CHECK_THAT(rejected[1].second, Catch::StartsWith((c4 / "state.pt").string() +
                                                   ": truncated or altered"));
  // latest_checkpoint, which does not verify, still names the newest by step.
  CHECK(latest_checkpoint(dir.path()) == c6);
}

}  // namespace checkpoint_verify
