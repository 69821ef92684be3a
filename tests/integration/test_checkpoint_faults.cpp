// Faults inside and after a checkpoint's write (docs/reliability.md, "Faults in checkpoints"):
// a process stopped after byte N of its saves (the test hook FRUGAL_FAULT_SAVE_EXIT_AFTER_BYTES,
// src/io/save_faults.h), single process and world 2 under `frugal launch` with zero3; a
// bit-flipped or truncated newest checkpoint; a save that meets a full disk (the ENOSPC hook, and
// a size-limited tmpfs) or a read-only checkpoint directory. Each ends with the previous
// checkpoint intact and a resumed run whose final checkpoint equals an uninterrupted run's byte
// for byte.
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "frugal/io/checkpoint.h"
#include "frugal/util/error.h"
#include "support/cli.h"
#include "support/checkpoint_files.h"
#include "support/helpers.h"
#include "support/model_configs.h"
#include "support/skip.h"

namespace fs = std::filesystem;
using namespace frugal;

// Named, so that the helpers below cannot meet another test file's in a unity batch.
namespace checkpoint_faults {
namespace {

// src/io/save_faults.h's kSaveFaultExitCode (a private header of the library).
constexpr int kFaultExit = 86;

// A small GPT with dropout, shuffled data from loader threads and AdamW: everything a resume
// must restore exactly.
const std::string kSingle =
    test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
    " --set model.dropout=0.1 --set data.type=synthetic"
    " --set data.synthetic_samples=256 --set data.micro_batch_size=4 --set data.num_workers=2"
    " --set optim.type=adamw --set train.checkpoint_every=2 --set train.eval_batches=0"
    " --set train.progress=none --set generate.tokens=0";

const std::string kZero3 =
    test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
    " --set data.type=synthetic --set data.synthetic_samples=256"
    " --set data.micro_batch_size=2 --set data.num_workers=0 --set optim.type=adamw"
    " --set strategy.sharding.mode=zero3 --set distributed.timeout_s=30"
    " --set train.checkpoint_every=2 --set train.eval_batches=0 --set train.progress=none"
    " --set generate.tokens=0";

fs::path step_dir(const fs::path& run, int step) {
  return run / "checkpoints" / fmt::format("step_{:08d}", step);
}


// The bytes one save writes: every file of a checkpoint, manifest included (all go through
// io::write_file_synced, which the hooks count). `but` leaves one file out (another rank's).
uint64_t save_bytes(const fs::path& ckpt, const std::string& but = "") {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) {
    if (e.path().filename() != but) n += e.file_size();
  }
  return n;
}

// What a save left in the checkpoints folder besides checkpoints: staging folders, temp files.
std::vector<std::string> litter(const fs::path& run) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run / "checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0) out.push_back(name);
  }
  return out;
}

// Every published checkpoint passes verification (none is partial); returns the newest.
std::optional<fs::path> all_published_valid(const fs::path& run) {
  const auto all = list_checkpoints(run / "checkpoints");
  for (const auto& c : all) {
    INFO(c);
    CHECK_NOTHROW(verify_checkpoint(c));
  }
  if (all.empty()) return std::nullopt;
  return all.back();
}

struct Runner {
  std::string launch;    // "" or "launch --nproc-per-node 2 --master-port 0 --"
  fs::path runs;         // run.dir
  std::string settings;  // the run's --set flags

  std::string command(const std::string& name, const std::string& env = "",
                      const std::string& extra = "") const {
    return env + (env.empty() ? "" : " ") + test::quote(test::frugal_binary()) + " " + launch +
           " train --set run.dir=" + test::quote(runs.string()) + " --set run.name=" + name +
           " --set run.resume=auto " + settings + " " + extra;
  }
  test::CommandResult run(const std::string& name, const std::string& env = "",
                          const std::string& extra = "") const {
    return test::run_command(command(name, env, extra), 300);
  }
};

// A run of `steps` steps keeping the newest `keep_last` checkpoints.
Runner runner(const std::string& launch, const fs::path& runs, const std::string& settings,
              int steps, int keep_last) {
  return {launch, runs,
          settings + fmt::format(" --set train.max_steps={} --set train.keep_last={}", steps, keep_last)};
}

// stderr's error lines ("frugal: error: ..."): a user error is exactly one.
std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = err.find("error: ", at)) != std::string::npos) {
    const size_t end = err.find('\n', at);
    out.push_back(err.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? err.size() : end;
  }
  return out;
}

// Stops every save of a run after `bytes` in total, then resumes it (run.resume: auto) to the
// end; checks what the stop left and that the end equals the reference.
// Returns the step of the checkpoint the resume started from (0: none, started over).
int stop_and_resume(const Runner& r, const std::string& name, uint64_t bytes, int steps,
                    const fs::path& reference) {
  auto stopped = r.run(name, fmt::format("FRUGAL_FAULT_SAVE_EXIT_AFTER_BYTES={}", bytes));
  INFO("stopped after byte " << bytes << ": " << stopped.out << stopped.err);
  REQUIRE(stopped.exit_code == kFaultExit);  // the hook fired, so inside a save's write
  const fs::path run = r.runs / name;
  const auto newest = all_published_valid(run);
  if (newest) CHECK(*newest != step_dir(run, steps));  // the run did not get to its end
  // A run stopped in its first save left nothing to resume: started over, as its user would.
  auto resumed = r.run(name, "", newest ? "" : "--set run.overwrite=true");
  INFO("resumed: " << resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  if (newest) CHECK_THAT(resumed.out + resumed.err, Catch::Contains("resumed from " + newest->string()));
  test::check_identical(reference, step_dir(run, steps));
  CHECK(litter(run).empty());
  return newest ? std::stoi(newest->filename().string().substr(5)) : 0;
}

}  // namespace

TEST_CASE("a save stopped after byte N keeps the previous checkpoint, and resumed ends bit-identical",
          "[integration][reliability]") {
  test::TempDir dir("frugal-save-faults");
  const int steps = 8;
  const Runner r = runner("", dir.path(), kSingle, steps, 2);
  auto ref = r.run("reference");
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  const fs::path reference = step_dir(dir / "reference", steps);
  // Four saves of about this size; the stops fall anywhere in them but the last bytes.
  const uint64_t per_save = save_bytes(reference);
  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<uint64_t> byte(1, per_save * (steps / 2) - 64);
  std::string stops;
  for (int trial = 0; trial < 5; ++trial) {
    const uint64_t at = byte(rng);
    const int from = stop_and_resume(r, fmt::format("stop{}", trial), at, steps, reference);
    stops += fmt::format(" byte {} (resumed from step {})", at, from);
  }
  WARN("5 saves stopped, single process, " << per_save << " bytes a save:" << stops);
}

TEST_CASE("world 2 zero3 under launch: a save stopped after byte N, resumed, ends bit-identical",
          "[integration][reliability][multiproc]") {
  test::TempDir dir("frugal-save-faults-zero3");
  const int steps = 8;
  const Runner r = runner("launch --nproc-per-node 2 --master-port 0 --", dir.path(), kZero3, steps, 2);
  auto ref = r.run("reference");
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  const fs::path reference = step_dir(dir / "reference", steps);
  // Rank 0 writes all but rank 1's shard; both ranks count their own bytes.
  const uint64_t rank0 = save_bytes(reference, shard_file_name(1, 2));
  std::mt19937_64 rng(20261202);
  std::uniform_int_distribution<uint64_t> byte(1, rank0 * (steps / 2) - 64);
  std::string stops;
  for (int trial = 0; trial < 3; ++trial) {
    const uint64_t at = byte(rng);
    const int from = stop_and_resume(r, fmt::format("stop{}", trial), at, steps, reference);
    stops += fmt::format(" byte {} (resumed from step {})", at, from);
  }
  WARN("3 saves stopped, world 2 zero3, " << rank0 << " bytes a save on rank 0:" << stops);
}

namespace {

struct Damage {
  std::string name, file, message;
  void (*apply)(std::string&);
};

void flip_middle(std::string& b) { b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x10); }
void cut_100(std::string& b) { b.resize(b.size() - 100); }

// Each damage done to the newest checkpoint of a finished run: asked for by name, an error
// naming the file (exit 2, nothing changed); under resume: auto, a warning naming it, the
// previous checkpoint taken instead, and a run that ends where the reference ended.
void check_damaged_newest(const Runner& r, int steps, const std::vector<Damage>& damages) {
  auto ref = r.run("reference");
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  const bool job = !r.launch.empty();
  for (const Damage& d : damages) {
    INFO(d.name << " " << d.file);
    auto whole = r.run(d.name);
    REQUIRE(whole.exit_code == 0);
    const fs::path run = r.runs / d.name;
    const fs::path newest = step_dir(run, steps), previous = step_dir(run, steps - 2);
    const fs::path bad = newest / d.file;
    std::string bytes = test::read_text(bad);
    d.apply(bytes);
    test::write_text(bad, bytes);
    const std::string config_before = test::read_text(run / "config.resolved.yaml");

    auto named = r.run(d.name, "", "--set run.resume=" + test::quote(newest.string()));
    INFO(named.out << named.err);
    CHECK(named.exit_code == 2);
    const std::string error = "frugal: error: run.resume: " + bad.string() + ": " + d.message;
    if (job) {  // every rank found the same (each verified its share, and they agreed)
      CHECK(error_lines(named.err).size() >= 1);
      CHECK_THAT(named.err, Catch::Contains(error));
    } else {
      CHECK(test::count_lines(named.err) == 1);
      CHECK_THAT(named.err, Catch::StartsWith(error));
    }
    CHECK(test::read_text(bad) == bytes);
    CHECK(test::read_text(run / "config.resolved.yaml") == config_before);

    auto fell_back = r.run(d.name);
    INFO(fell_back.out << fell_back.err);
    REQUIRE(fell_back.exit_code == 0);
    const std::string said = fell_back.out + fell_back.err;
    CHECK_THAT(said, Catch::Contains("run.resume: auto: rejected checkpoint '" + newest.string() +
                                     "': " + bad.string() + ": " + d.message));
    CHECK_THAT(said, Catch::Contains("moved aside to '" + newest.string() + ".rejected'"));
    CHECK_THAT(said, Catch::Contains("run.resume: auto: resuming from '" + previous.string() +
                                     "', the newest valid checkpoint"));
    CHECK_THAT(said, Catch::Contains("resumed from " + previous.string() + " (step " +
                                     std::to_string(steps - 2) + ")"));
    CHECK(test::read_text(fs::path(newest.string() + ".rejected") / d.file) == bytes);
    test::check_identical(step_dir(r.runs / "reference", steps), newest);
  }
}

}  // namespace

TEST_CASE("a bit-flipped or truncated newest checkpoint: resume auto falls back, resume=DIR fails",
          "[integration][reliability]") {
  test::TempDir dir("frugal-damaged-ckpt");
  const int steps = 12;
  const Runner r = runner("", dir.path(), kSingle, steps, 3);
  check_damaged_newest(r, steps,
                       {{"flipped", "model.pt", "corrupt (content hash does not match the manifest)", flip_middle},
                        {"truncated", "optimizer.pt", "truncated or altered", cut_100}});
}

TEST_CASE("world 2 zero3: ranks verify a damaged newest checkpoint together and agree to fall back",
          "[integration][reliability][multiproc]") {
  test::TempDir dir("frugal-damaged-zero3");
  const int steps = 8;
  const Runner r = runner("launch --nproc-per-node 2 --master-port 0 --", dir.path(), kZero3, steps, 3);
  // Rank 1's shard flipped in its middle: rank 1 alone checks its own shard's hashes, so rank
  // 0 learns of it only from rank 1. Rank 0's shard cut short: every rank sees the size.
  check_damaged_newest(
      r, steps,
      {{"flipped", shard_file_name(1, 2), "corrupt (the hash of bytes", flip_middle},
       {"truncated", shard_file_name(0, 2), "truncated or altered", cut_100}});
}

TEST_CASE("a save that fails with ENOSPC: one line naming the file, the previous checkpoint kept",
          "[integration][reliability]") {
  test::TempDir dir("frugal-enospc");
  const int steps = 6;
  const Runner r = runner("", dir.path(), kSingle, steps, 2);
  auto ref = r.run("reference");
  REQUIRE(ref.exit_code == 0);
  const fs::path reference = step_dir(dir / "reference", steps);
  // Room for the first save and half the second.
  const uint64_t limit = save_bytes(reference) * 3 / 2;
  auto full = r.run("full", fmt::format("FRUGAL_FAULT_SAVE_ENOSPC_AFTER_BYTES={}", limit));
  INFO(full.out << full.err);
  CHECK(full.exit_code == 2);
  const auto errors = error_lines(full.err);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::StartsWith("error: cannot write '" +
                                          (dir / "full" / "checkpoints").string() + "/") &&
                            Catch::EndsWith("': No space left on device"));
  CHECK(list_checkpoints(dir / "full" / "checkpoints") ==
        std::vector<fs::path>{step_dir(dir / "full", 2)});
  CHECK_NOTHROW(load_checkpoint(step_dir(dir / "full", 2)));
  CHECK(litter(dir / "full").empty());

  auto resumed = r.run("full");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out + resumed.err,
             Catch::Contains("resumed from " + step_dir(dir / "full", 2).string()));
  test::check_identical(reference, step_dir(dir / "full", steps));
}

namespace {

// A tmpfs mounted for one test, unmounted however the test ends. Needs root (or CAP_SYS_ADMIN);
// `error` says why it is not mounted.
class Tmpfs {
 public:
  Tmpfs(fs::path at, uint64_t bytes) : at_(std::move(at)) {
    fs::create_directories(at_);
    if (::mount("tmpfs", at_.c_str(), "tmpfs", 0, fmt::format("size={}", bytes).c_str()) == 0) {
      mounted_ = true;
    } else {
      error = std::strerror(errno);
    }
  }
  ~Tmpfs() {
    if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  bool mounted() const { return mounted_; }
  bool remount(unsigned long flags, const std::string& options) {
    return ::mount("tmpfs", at_.c_str(), "tmpfs", MS_REMOUNT | flags, options.c_str()) == 0;
  }

  std::string error;

 private:
  fs::path at_;
  bool mounted_ = false;
};

// What a checkpoint takes on a tmpfs, which counts whole pages.
uint64_t pages_of(const fs::path& ckpt) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) n += (e.file_size() + 4095) / 4096 * 4096;
  return n;
}

}  // namespace

TEST_CASE("a full disk and a read-only checkpoint directory (tmpfs): clean errors, resumable",
          "[integration][reliability]") {
  test::TempDir dir("frugal-tmpfs");
  const int steps = 6;
  const Runner on_disk{"", dir / "runs", kSingle + fmt::format(" --set train.max_steps={}", steps) +
                                             " --set train.keep_last=2"};
  auto ref = on_disk.run("reference");
  REQUIRE(ref.exit_code == 0);
  const fs::path reference = step_dir(dir / "runs" / "reference", steps);
  const uint64_t ckpt_pages = pages_of(reference);

  // Full disk: a filesystem with room for the run's small files, one checkpoint and half of
  // another (the second save needs a whole one beside the first).
  const uint64_t size = (ckpt_pages * 3 / 2 + 4095) / 4096 * 4096;
  Tmpfs small(dir / "small", size);
  if (!small.mounted()) {
    test::skip("cannot mount a tmpfs (needs root): " + small.error);
    return;
  }
  const Runner on_small{"", dir / "small", on_disk.settings};
  const fs::path run = dir / "small" / "full";
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The second attempt resumes from the kept checkpoint and fails the same way: nothing the
    // first left stands in its way.
    INFO("attempt " << attempt);
    auto full = on_small.run("full");
    INFO(full.out << full.err);
    CHECK(full.exit_code == 2);
    const auto errors = error_lines(full.err);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::StartsWith("error: cannot write '" + (run / "checkpoints").string()) &&
                              Catch::EndsWith("': No space left on device"));
    if (attempt == 1) {
      CHECK_THAT(full.out + full.err, Catch::Contains("resumed from " + step_dir(run, 2).string()));
    }
    CHECK(list_checkpoints(run / "checkpoints") == std::vector<fs::path>{step_dir(run, 2)});
    CHECK_NOTHROW(load_checkpoint(step_dir(run, 2)));
    CHECK(litter(run).empty());
  }
  // Room again: the run goes on from its kept checkpoint to the reference's end.
  REQUIRE(small.remount(0, fmt::format("size={}", ckpt_pages * 4 + (1 << 20))));
  auto roomy = on_small.run("full");
  INFO(roomy.out << roomy.err);
  REQUIRE(roomy.exit_code == 0);
  test::check_identical(reference, step_dir(run, steps));

  // Read-only: a run's checkpoints folder that can be read but not written (root bypasses
  // permission bits, not a read-only mount). Its first leg stops in its second save.
  const fs::path ro_run = dir / "runs" / "readonly";
  auto first = on_disk.run("readonly", fmt::format("FRUGAL_FAULT_SAVE_EXIT_AFTER_BYTES={}",
                                                   save_bytes(reference) * 3 / 2));
  REQUIRE(first.exit_code == kFaultExit);
  REQUIRE(list_checkpoints(ro_run / "checkpoints") == std::vector<fs::path>{step_dir(ro_run, 2)});
  fs::rename(step_dir(ro_run, 2), dir / "saved_step");
  Tmpfs ro(ro_run / "checkpoints", 64 << 20);
  REQUIRE(ro.mounted());
  fs::copy(dir / "saved_step", step_dir(ro_run, 2), fs::copy_options::recursive);
  REQUIRE(ro.remount(MS_RDONLY, ""));
  auto refused = on_disk.run("readonly");
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  const auto errors = error_lines(refused.err);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::StartsWith("error: cannot create directory '" +
                                          (ro_run / "checkpoints").string()) &&
                            Catch::EndsWith("': Read-only file system"));
  CHECK_NOTHROW(verify_checkpoint(step_dir(ro_run, 2)));
  REQUIRE(ro.remount(0, ""));
  auto writable = on_disk.run("readonly");
  INFO(writable.out << writable.err);
  REQUIRE(writable.exit_code == 0);
  CHECK_THAT(writable.out + writable.err,
             Catch::Contains("resumed from " + step_dir(ro_run, 2).string()));
  test::check_identical(reference, step_dir(ro_run, steps));
}

}  // namespace checkpoint_faults
