// The checkpoint reader: manifest.json, then model.pt, optimizer.pt, state.pt and meta.json
// through the manifest's size and hash checks into the tensor archive reader, and the tensor
// files again by their indexes (io/checkpoint_files.h: whole and by ranges): model.pt's and
// optimizer.pt's in the manifest, the shard's in its own index file. The input's first byte
// picks the file (kFiles), the rest replaces it in a small valid checkpoint (sharded, one
// rank); a replaced file gets a manifest entry that matches it (a replaced index, the entry of
// the index file), so that the bytes reach the parser behind the integrity check rather than
// stopping at it.
#include <ATen/ATen.h>

#include <array>

#include "frugal/io/checkpoint.h"
#include "frugal/io/checkpoint_files.h"
#include "frugal/io/checkpoint_meta.h"
#include "checkpoint_fixture.h"
#include "fuzz_input.h"

namespace {

constexpr const char* kShard = "shard-00000-of-00001.pt";
constexpr std::array<const char*, 6> kFiles = {"manifest.json", "model.pt", "optimizer.pt",
                                               "state.pt", "meta.json",
                                               "shard-00000-of-00001.pt.index.json"};

struct Fixture {
  std::filesystem::path dir;                        // the checkpoint directory
  std::array<std::string, kFiles.size()> original;  // each file's bytes, to put back
};

const Fixture& fixture() {
  static const Fixture made = [] {
    frugal::Checkpoint ckpt;
    ckpt.step = 3;
    ckpt.model = {{"w", at::arange(6, at::kFloat).reshape({2, 3})}, {"b", at::ones({3})}};
    ckpt.optimizer = {{"w/exp_avg", at::zeros({2, 3})}};
    ckpt.state = {{"rng", at::arange(4, at::kLong)}};
    ckpt.meta_json = R"({"step": 3, "data": {"epoch": 0, "position": 12}})";
    const frugal::NamedTensors shard = {{"unit/group0/param", at::arange(7, at::kFloat)},
                                        {"unit/group0/exp_avg", at::ones({7})},
                                        {"unit/group0/step", at::tensor(3.0)},
                                        {"rng.cpu", at::arange(5, at::kByte)}};
    const std::filesystem::path checkpoints = frugal::fuzz::scratch_dir() + "/checkpoints";
    frugal::begin_sharded_checkpoint(checkpoints, ckpt.step);
    frugal::write_checkpoint_shard(checkpoints, ckpt.step, 0, 1, shard);
    Fixture f;
    f.dir = frugal::publish_sharded_checkpoint(checkpoints, ckpt, 1, 0);
    f.original = frugal::fuzz::keep_files(f.dir, kFiles);
    return f;
  }();
  return made;
}

void write(const std::filesystem::path& path, std::string_view bytes) {
  frugal::fuzz::write_bytes(path.string(), bytes);
}

}  // namespace

FRUGAL_FUZZ_ENTRY(checkpoint) {
  if (size == 0) return 0;
  const Fixture& f = fixture();
  const size_t which = data[0] % kFiles.size();
  const std::string_view bytes = frugal::fuzz::as_text(data + 1, size - 1);
  write(f.dir / kFiles[which], bytes);
  if (which != 0) {
    write(f.dir / kFiles[0], frugal::fuzz::manifest_with(f.original[0], kFiles[which], bytes));
  }
  const int whole = frugal::fuzz::expect_frugal_errors_only([&] {
    frugal::verify_checkpoint(f.dir);
    const frugal::Checkpoint ckpt = frugal::load_checkpoint(f.dir);
    frugal::io::checkpoint_meta(ckpt, f.dir);
  });
  const int by_file = frugal::fuzz::expect_frugal_errors_only([&] {
    frugal::io::CheckpointFiles files(f.dir);
    for (const char* name : {"model.pt", "optimizer.pt", "state.pt", kShard}) {
      frugal::io::CheckpointFile& file = files.file(name);
      for (const std::string& tensor : file.names()) {
        const int64_t n = file.numel(tensor);
        file.read_range(tensor, n / 2, n - n / 2);
        file.read(tensor);
      }
    }
  });
  write(f.dir / kFiles[which], f.original[which]);
  write(f.dir / kFiles[0], f.original[0]);
  return whole != 0 ? whole : by_file;
}
