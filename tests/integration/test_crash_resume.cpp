// Crash and resume: `frugal train` killed with SIGKILL at random moments (in a step, in a
// checkpoint's write, in the start-up), then run again with run.resume: auto until it
// finishes, ends with a final checkpoint byte for byte equal to an uninterrupted run's:
// parameters, optimizer state, loss scaler, random generators and data position all came back
// exactly from whichever checkpoint was the newest complete one. A single process, and world
// 2 under `frugal launch` with zero3 (sharded checkpoints). On a GPU, the single-process case
// again on CUDA (tools/gpu/check.sh runs the [cuda] cases), its final state compared within a
// tolerance.
//
// FRUGAL_CRASH_TRIALS sets the trials per case (CI: 3; tools/fault_trials.sh runs more).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "frugal/io/checkpoint.h"
#include "support/cli.h"
#include "support/checkpoint_files.h"
#include "support/helpers.h"
#include "support/model_configs.h"
#include "support/skip.h"

namespace fs = std::filesystem;
using namespace frugal;

namespace {

int trials_per_case() {
  const char* v = std::getenv("FRUGAL_CRASH_TRIALS");
  return v != nullptr && *v != '\0' ? std::max(1, std::atoi(v)) : 3;
}


fs::path final_checkpoint(const fs::path& run, int steps) {
  return run / "checkpoints" / fmt::format("step_{:08d}", steps);
}

struct CrashCase {
  std::string prefix;  // "" or "launch --nproc-per-node 2 --master-port 0"
  std::string args;    // the training run's settings
  int steps;
  // On a GPU, cuBLAS and SDPA may take other kernels from run to run (and some sum with
  // atomics): the final parameters and optimizer state are compared within this relative
  // tolerance instead of byte for byte. 0: bit-identical.
  double tolerance = 0;
};

// The final checkpoint `got` against the uninterrupted run's `expected`: byte for byte, or
// every tensor of model.pt and optimizer.pt within `tolerance` of the reference's.
void check_final(const fs::path& expected, const fs::path& got, double tolerance) {
  if (tolerance == 0) return test::check_identical(expected, got);
  INFO("expected " << expected << ", got " << got);
  const Checkpoint want = load_checkpoint(expected), have = load_checkpoint(got);
  CHECK(have.step == want.step);
  for (const auto& [w, h] : {std::pair<const NamedTensors&, const NamedTensors&>(want.model, have.model),
                              std::pair<const NamedTensors&, const NamedTensors&>(want.optimizer, have.optimizer)}) {
    REQUIRE(h.size() == w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      INFO(w[i].first);
      REQUIRE(h[i].first == w[i].first);
      const at::Tensor a = w[i].second.to(at::kDouble), b = h[i].second.to(at::kDouble);
      const double scale = std::max(1e-6, a.abs().max().item<double>());
      CHECK((a - b).abs().max().item<double>() <= tolerance * scale);
    }
  }
}

// One uninterrupted run, then trials of kill-and-resume; returns the kills that landed.
int run_trials(const CrashCase& c, const test::TempDir& dir) {
  const std::string base = c.prefix + " train --set run.dir=" + test::quote(dir.path().string()) +
                           " --set run.resume=auto " + c.args;
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const auto started = std::chrono::steady_clock::now();
  auto ref = test::frugal(base + " --set run.name=reference", 300);
  // How long a whole run takes; kill moments are fractions of it. Under CTest's parallel
  // load the reference can run far slower than the trials after it, so a whole run that
  // finished before its kill replaces this with its own, shorter time.
  double duration = seconds_since(started);
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  const fs::path expected = final_checkpoint(dir / "reference", c.steps);
  REQUIRE(fs::exists(expected));

  std::mt19937 rng(20261201);
  // The first kill of a trial lands within the first 70% of a whole run's duration, later
  // ones anywhere in it (a resumed run is shorter, so some of those miss: it finishes).
  std::uniform_real_distribution<double> first_moment(0.05, 0.7);
  std::uniform_real_distribution<double> moment(0.05, 1.0);
  int kills = 0;
  for (int trial = 0; trial < trials_per_case(); ++trial) {
    // A trial none of whose kills landed (the machine ran this trial faster than the
    // reference) tested nothing: it is run again under a new name, up to three times.
    int trial_kills = 0;
    std::string name;
    for (int redo = 0; redo < 3 && trial_kills == 0; ++redo) {
      name = fmt::format("trial{}_{}", trial, redo);
      const std::string run = base + " --set run.name=" + name;
      // Up to three kills, each at a random moment; then a run left alone to finish. A run
      // killed before its first checkpoint left nothing to resume: it is started over
      // (run.overwrite), as its user would.
      for (int attempt = 0; attempt < 4; ++attempt) {
        const bool kill = attempt < 3;
        // No published checkpoint: a kill inside the first save leaves only its staging
        // directory, which is nothing to resume from either.
        const bool nothing_saved = list_checkpoints(dir / name / "checkpoints").empty();
        const double at = (attempt == 0 ? first_moment(rng) : moment(rng)) * duration;
        const std::string cmd =
            (kill ? fmt::format("timeout -s KILL {:.2f} ", at) : std::string()) +
            test::quote(test::frugal_binary()) + " " + run +
            (fs::exists(dir / name) && nothing_saved ? " --set run.overwrite=true" : "");
        const auto attempt_started = std::chrono::steady_clock::now();
        auto r = test::run_command(cmd, 300);
        INFO("trial " << name << " attempt " << attempt << ": " << r.out << r.err);
        if (r.exit_code == 137) {
          ++trial_kills;
          continue;
        }
        REQUIRE(r.exit_code == 0);
        if (attempt == 0) duration = std::min(duration, seconds_since(attempt_started));
        break;
      }
    }
    kills += trial_kills;
    const fs::path last = final_checkpoint(dir / name, c.steps);
    REQUIRE(fs::exists(last));
    INFO("trial " << name);
    check_final(expected, last, c.tolerance);
  }
  return kills;
}

// The single-process cases' run: a tiny GPT with dropout, shuffled synthetic data, AdamW and a
// checkpoint every other step, `steps` long, `extra` settings after.
std::string small_run(int steps, int workers, const std::string& extra) {
  return test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
         " --set model.dropout=0.1 --set data.type=synthetic --set data.synthetic_samples=256"
         " --set data.micro_batch_size=4 --set optim.type=adamw --set train.checkpoint_every=2"
         " --set train.keep_last=2 --set train.eval_batches=0 --set train.progress=none"
         " --set generate.tokens=0" +
         fmt::format(" --set data.num_workers={} --set train.max_steps={} ", workers, steps) + extra;
}

}  // namespace

TEST_CASE("killed at random moments and resumed, a run ends bit-identical to an uninterrupted one",
          "[integration][reliability][resume]") {
  test::TempDir dir("frugal-crash");
  // Dropout, shuffled data from worker threads, AdamW, a checkpoint every other step.
  const CrashCase single{"", small_run(30, 2, ""), 30};
  const int kills = run_trials(single, dir);
  WARN(trials_per_case() << " trials, " << kills << " SIGKILLs survived (single process)");
  CHECK(kills >= trials_per_case());  // every trial survived at least one kill
}

TEST_CASE("with the optimizer state on disk: killed at random moments and resumed, bit-identical",
          "[integration][reliability][resume][nvme]") {
  test::TempDir dir("frugal-crash-nvme");
  fs::create_directory(dir / "nvme");
  // offload.optimizer nvme: the live state file is scratch (unlinked, gone with the killed
  // process); each resume lays it out again from the newest checkpoint.
  const CrashCase nvme{"",
                       small_run(20, 0,
                                 "--set strategy.offload.optimizer=nvme --set strategy.offload.buffer_mb=0.05"
                                 " --set strategy.offload.nvme_path=" +
                                     test::quote((dir / "nvme").string())),
                       20};
  const int kills = run_trials(nvme, dir);
  WARN(trials_per_case() << " trials, " << kills << " SIGKILLs survived (optimizer state on disk)");
  CHECK(kills >= trials_per_case());
  CHECK(fs::is_empty(dir / "nvme"));  // no state file outlives its process
}

TEST_CASE("with asynchronous checkpoints: killed during background writes and resumed, bit-identical",
          "[integration][reliability][resume][async]") {
  test::TempDir dir("frugal-crash-async");
  // train.checkpoint_async: a kill while the thread writes leaves the staging folder
  // unpublished; the previous checkpoint is the newest complete one.
  const CrashCase async{"", small_run(20, 0, "--set train.checkpoint_async=true"), 20};
  const int kills = run_trials(async, dir);
  WARN(trials_per_case() << " trials, " << kills << " SIGKILLs survived (asynchronous checkpoints)");
  CHECK(kills >= trials_per_case());
}

TEST_CASE("world 2 under frugal launch with zero3: killed and resumed, bit-identical",
          "[integration][reliability][resume][multiproc]") {
  test::TempDir dir("frugal-crash-zero3");
  const CrashCase zero3{
      "launch --nproc-per-node 2 --master-port 0",
      test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
          " --set data.type=synthetic --set data.synthetic_samples=256"
      " --set data.micro_batch_size=2 --set data.num_workers=0 --set optim.type=adamw"
      " --set strategy.sharding.mode=zero3 --set distributed.timeout_s=30"
      " --set train.max_steps=16 --set train.checkpoint_every=2 --set train.keep_last=2"
      " --set train.eval_batches=0 --set train.progress=none --set generate.tokens=0",
      16};
  const int kills = run_trials(zero3, dir);
  WARN(trials_per_case() << " trials, " << kills << " SIGKILLs survived (world 2, zero3)");
  CHECK(kills >= trials_per_case());
  // No rank outlives its launcher's kill.
  const auto left = test::kill_processes_mentioning(dir.path().string());
  for (const auto& p : left) UNSCOPED_INFO("left running: " << p.pid << " " << p.command_line);
  CHECK(left.empty());
}

TEST_CASE("on CUDA: killed at random moments and resumed, a run ends where an uninterrupted one "
          "ends",
          "[integration][reliability][resume][cuda]") {
  if (test::skip_without_cuda()) return;
  test::TempDir dir("frugal-crash-cuda");
  // The single-process case on the GPU, in bf16-mixed with checkpointing: the CUDA generator
  // (dropout), the loss scale's state and the optimizer state mapped back to the device all
  // come back from whichever checkpoint was the newest complete one.
  const CrashCase cuda{
      "",
      "--set run.device=cuda --set strategy.precision=bf16-mixed"
      " --set strategy.checkpointing=full " +
          test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
          " --set model.dropout=0.1 --set data.type=synthetic --set data.synthetic_samples=256"
      " --set data.micro_batch_size=4 --set data.num_workers=2 --set optim.type=adamw"
      " --set train.max_steps=30 --set train.checkpoint_every=2 --set train.keep_last=2"
      " --set train.eval_batches=0 --set train.progress=none --set generate.tokens=0",
      30, 1e-3};
  const int kills = run_trials(cuda, dir);
  WARN(trials_per_case() << " trials, " << kills << " SIGKILLs survived (CUDA)");
  CHECK(kills >= trials_per_case());
}
