// The resharding reader (distributed/checkpoint_reader.h): a checkpoint sharded by two ranks
// read by rank 0 of another layout, through the sharding layout in meta.json, the shard
// files' indexes and their entries' sizes, into whole tensors and element ranges that cross
// the ranks' shards. The input's first byte picks the file (kFiles), the rest replaces it in a
// small valid checkpoint, with a manifest entry that matches it (as the checkpoint target does),
// so that the bytes reach the layout and index checks rather than stopping at the hashes.
#include <ATen/ATen.h>

#include <array>
#include <nlohmann/json.hpp>

#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/distributed/sharded_state.h"
#include "frugal/io/checkpoint.h"
#include "checkpoint_fixture.h"
#include "fuzz_input.h"

namespace {

constexpr std::array<const char*, 4> kFiles = {"manifest.json", "meta.json",
                                               "shard-00000-of-00002.pt.index.json",
                                               "shard-00001-of-00002.pt.index.json"};

struct Fixture {
  std::filesystem::path dir;
  std::array<std::string, kFiles.size()> original;
};

const Fixture& fixture() {
  static const Fixture made = [] {
    // One flat buffer of 7 elements ("w" 2x3 and "b" 1), 4 per rank at 2 ranks (padded).
    frugal::dist::ShardLayout layout;
    layout.mode = "zero3";
    layout.world_size = 2;
    layout.flats.push_back({"unit/group0", 7, {"w", "b"}, {{2, 3}, {1}}, {0, 6}});
    frugal::Checkpoint ckpt;
    ckpt.step = 5;
    ckpt.meta_json = nlohmann::json{{"step", 5},
                                    {"data", {{"epoch", 0}, {"position", 10}}},
                                    {"sharding", nlohmann::json::parse(
                                                     frugal::dist::layout_to_json(layout))}}
                         .dump();
    const std::filesystem::path checkpoints = frugal::fuzz::scratch_dir() + "/reshard";
    frugal::begin_sharded_checkpoint(checkpoints, ckpt.step);
    for (int r = 0; r < 2; ++r) {
      const frugal::NamedTensors shard = {
          {"unit/group0/param", at::arange(4, at::kFloat) + 4 * r},
          {"unit/group0/exp_avg", at::ones({4})},
          {"unit/group0/step", at::tensor(5.0)},
          {"rng.cpu", at::arange(5, at::kByte)}};
      frugal::write_checkpoint_shard(checkpoints, ckpt.step, r, 2, shard);
    }
    Fixture f;
    f.dir = frugal::publish_sharded_checkpoint(checkpoints, ckpt, 2, 0);
    f.original = frugal::fuzz::keep_files(f.dir, kFiles);
    return f;
  }();
  return made;
}

}  // namespace

FRUGAL_FUZZ_ENTRY(reshard) {
  if (size == 0) return 0;
  const Fixture& f = fixture();
  const size_t which = data[0] % kFiles.size();
  const std::string_view bytes = frugal::fuzz::as_text(data + 1, size - 1);
  frugal::fuzz::write_bytes((f.dir / kFiles[which]).string(), bytes);
  if (which != 0) {
    frugal::fuzz::write_bytes((f.dir / kFiles[0]).string(),
                              frugal::fuzz::manifest_with(f.original[0], kFiles[which], bytes));
  }
  const int result = frugal::fuzz::expect_frugal_errors_only([&] {
    frugal::dist::CheckpointReader reader(f.dir, /*rank=*/0);
    reader.rng_state();
    reader.whole("param");
    for (const std::string& kind : reader.optimizer_kinds()) reader.whole(kind);
    reader.read_range("param", "w", 2, 3);  // across the two ranks' shards
    reader.saved_numel("param", "b");
    reader.model();
  });
  frugal::fuzz::write_bytes((f.dir / kFiles[which]).string(), f.original[which]);
  frugal::fuzz::write_bytes((f.dir / kFiles[0]).string(), f.original[0]);
  return result;
}
