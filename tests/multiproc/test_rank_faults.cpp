// One rank of a world-2 training job fails mid-run, under each launcher a job may run under
// (frugal launch, torchrun --no-python, mpirun), in each of the three ways a real rank fails
// (the test hooks of src/distributed/rank_faults.h, all in step 3 of 6):
//   abort  rank 1 dies by SIGKILL between forward and backward (FRUGAL_FAULT_ABORT)
//   hang   rank 1 stops there forever, outside any collective (FRUGAL_FAULT_HANG)
//   skip   rank 1 does not issue one of the step's collectives (FRUGAL_FAULT_SKIP_COLLECTIVE)
// Whatever the launcher and the fault, the job must end by itself: a non-zero exit code, the
// launcher and every rank gone within distributed.timeout_s plus a stated grace of the fault,
// no process of the job left running, and an error that names rank 1 (docs/reliability.md,
// "A rank that fails, hangs or takes another path").
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "multiproc/multiproc.h"
#include "support/model_configs.h"
#include "support/skip.h"

namespace rank_faults {
namespace {

namespace fs = std::filesystem;
using namespace frugal::test;
using Clock = std::chrono::steady_clock;

// Every job's distributed.timeout_s: how long a surviving rank waits in a collective, and the
// ranks in their rendezvous (at 5 s, a rank starved of the CPU at start-up missed it).
constexpr int kTimeoutS = 10;
// What the end of a job may take beyond that timeout, from the fault to the launcher's exit:
// the failing collective's wait for the other ranks' flight-recorder dumps (3 s), a rank
// stopped by SIGTERM writing its own (up to 1 s), the launcher noticing and stopping the rest
// (torchrun polls its workers), and the ranks' exits. Measured on 2 cores: 4-5 s beyond the
// timeout for a hang, up to 18 s with the test at nice 19 beside other builds, where a rank's
// exit alone waited 4-5 s for the CPU.
constexpr double kGraceS = 25.0;
// A job still running after this is a hang: the test kills its process group and fails.
constexpr int kHardLimitS = 120;

enum class Launcher { launch, torchrun, mpirun };
enum class Fault { abort, hang, skip };

std::string torchrun_path() { return (fs::path(python()).parent_path() / "torchrun").string(); }

// Why the launcher cannot run here, or nothing when it can.
std::optional<std::string> missing(Launcher l) {
  if (l == Launcher::torchrun && !fs::exists(torchrun_path())) {
    return "torchrun not found (" + torchrun_path() + "; tools/bootstrap.sh makes the venv)";
  }
  if (l == Launcher::mpirun && run_command("command -v mpirun", 10).exit_code != 0) {
    return "mpirun not found (Debian: openmpi-bin)";
  }
  return std::nullopt;
}

// The fault's environment variable, and the line its hook prints when it fires.
struct FaultSetting {
  std::string variable;
  std::string value;
  std::string fired;
};

FaultSetting setting(Fault f) {
  switch (f) {
    case Fault::abort:
      return {"FRUGAL_FAULT_ABORT", "1:3", "FRUGAL_FAULT_ABORT: rank 1 dies by SIGKILL in step 3"};
    case Fault::hang:
      return {"FRUGAL_FAULT_HANG", "1:3", "FRUGAL_FAULT_HANG: rank 1 hangs in step 3"};
    case Fault::skip:
      // This job's collectives #0-#16 start it (barriers, the model's broadcast) and each step
      // issues three (the sum of targets, the gradient bucket, the loss's sum): #24 is step
      // 3's bucket, which rank 1 skips; its next collective, the loss's sum, meets rank 0's
      // bucket.
      return {"FRUGAL_FAULT_SKIP_COLLECTIVE", "1:24",
              "FRUGAL_FAULT_SKIP_COLLECTIVE: rank 1 skips its collective #24 (all_reduce)"};
  }
  return {};
}

// A tiny GPT under ddp on Gloo (the CPU), six steps, nothing saved but what a failure writes.
std::string train_args(const fs::path& runs) {
  return "train --set run.dir=" + quote(runs.string()) + " --set run.name=job " +
         transformer_sets("gpt", 1, 2, 16, 8, 32) + " --set data.type=synthetic"
         " --set data.synthetic_samples=64 --set data.micro_batch_size=2 --set data.num_workers=0"
         " --set strategy.sharding.mode=ddp --set distributed.backend=gloo"
         " --set train.max_steps=6 --set train.checkpoint_every=0 --set train.eval_batches=0"
         " --set train.progress=none --set generate.tokens=0 --set distributed.timeout_s=" +
         std::to_string(kTimeoutS);
}

std::string command_line(Launcher l, const FaultSetting& fault, const fs::path& runs) {
  const std::string frugal = quote(frugal_binary());
  const std::string env = fault.variable + "=" + fault.value;
  switch (l) {
    case Launcher::launch:
      return env + " " + frugal + " launch --nproc-per-node 2 --master-port 0 --grace 5 -- " +
             train_args(runs);
    case Launcher::torchrun:
      // --standalone: its own rendezvous on a free port; its agent serves the store.
      return env + " " + quote(torchrun_path()) + " --standalone --nproc-per-node 2 --no-python " +
             frugal + " " + train_args(runs);
    case Launcher::mpirun:
      return "mpirun --allow-run-as-root --oversubscribe -np 2 -x " + env +
             " -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=" + std::to_string(free_port()) + " " +
             frugal + " " + train_args(runs);
  }
  return "";
}

struct TimedRun {
  int exit_code = -1;  // -1: killed at the hard limit
  double total_s = 0;
  std::optional<double> fault_s;  // since the start, when the fault's line first appeared
  std::string out, err;
};

// Runs `command` (sh -c) in a process group of its own, output to files in `dir`, watching
// its stderr for `marker` (the fault's line, printed as the fault happens) to time its end
// from the fault. Past `hard_limit_s` the whole group is killed.
TimedRun run_timed(const std::string& command, const fs::path& dir, const std::string& marker,
                   int hard_limit_s) {
  const fs::path out = dir / "launcher.out", err = dir / "launcher.err";
  const std::string full = command + " >" + quote(out.string()) + " 2>" + quote(err.string());
  const auto start = Clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first
  TimedRun r;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (!r.fault_s && read_text(err).find(marker) != std::string::npos) r.fault_s = since_start();
    if (done == pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (since_start() > hard_limit_s) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.total_s = since_start();
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

// Does the job's account name rank 1, the rank the fault hit? frugal launch's closing line,
// a rank's flight-recorder verdict or error (frugal's own words), or the launcher's report of
// the rank that failed first (torchrun's failure table, mpirun's notice).
bool names_rank_1(const std::string& output) {
  static const std::regex naming(
      "frugal launch: job failed: .*rank 1[ ;]|"
      "flight recorder: .*rank 1[ ;]|"
      "rank +: 1 \\(local_rank: 1\\)|"
      "process rank 1 ");
  return std::regex_search(output, naming);
}

// frugal's own words on a hang, whatever the launcher: the rank that waited says which one it
// waited for, since no launcher can know that a live rank is stuck.
bool frugal_names_the_stuck_rank(const std::string& output) {
  static const std::regex naming(
      "frugal: error: distributed: all_reduce on rank 0 of 2 failed or did not finish within " +
      std::to_string(kTimeoutS) +
      " s[^\\n]*rank 1 left no dump within 3 s \\(it died, or is stuck\\)");
  return std::regex_search(output, naming);
}

const char* name(Fault f) {
  switch (f) {
    case Fault::abort:
      return "a rank aborting mid-step";
    case Fault::hang:
      return "a rank hanging in compute";
    case Fault::skip:
      return "a rank skipping a collective";
  }
  return "";
}

void check_fault(Launcher l, Fault f) {
  TempDir dir("frugal-rank-faults");
  const FaultSetting fault = setting(f);
  const TimedRun r =
      run_timed(command_line(l, fault, dir / "runs"), dir.path(), fault.fired, kHardLimitS);
  // What outlived the launcher (a rank, an MPI helper: anything whose command line holds
  // this job's run directory) is killed first, so that a failed check leaves nothing behind.
  const auto left = kill_processes_mentioning((dir / "runs").string());
  const std::string output = r.err + r.out;
  INFO(output);
  for (const auto& p : left) UNSCOPED_INFO("left running: " << p.pid << " " << p.command_line);
  const double after_fault = r.fault_s ? r.total_s - *r.fault_s : -1.0;
  WARN(name(f) << ": exit code " << r.exit_code << "; " << after_fault
               << " s from the fault to the end (limit " << kTimeoutS + kGraceS << " s), "
               << r.total_s << " s in all; " << left.size() << " processes left");
  REQUIRE(r.fault_s.has_value());  // the fault happened
  CHECK(r.exit_code > 0);          // failed, and by itself (-1: killed at the hard limit)
  CHECK(after_fault < kTimeoutS + kGraceS);
  CHECK(left.empty());
  CHECK(names_rank_1(output));
  if (f == Fault::hang) CHECK(frugal_names_the_stuck_rank(output));
}

// The three faults, one job each, under launcher `l` (skipped where it is not installed).
void check_faults(Launcher l) {
  if (const auto why = missing(l)) {
    skip(*why);
    return;
  }
  for (Fault f : {Fault::abort, Fault::hang, Fault::skip}) {
    DYNAMIC_SECTION(name(f)) { check_fault(l, f); }
  }
}

}  // namespace

// One test case per launcher: each is skipped as a whole where its launcher is missing.
TEST_CASE("rank faults under frugal launch: a rank aborting, hanging or skipping a collective",
          "[multiproc][reliability][rank_faults]") {
  check_faults(Launcher::launch);
}
TEST_CASE("rank faults under torchrun --no-python: a rank aborting, hanging or skipping",
          "[multiproc][reliability][rank_faults]") {
  check_faults(Launcher::torchrun);
}
TEST_CASE("rank faults under mpirun: a rank aborting, hanging or skipping a collective",
          "[multiproc][reliability][rank_faults]") {
  check_faults(Launcher::mpirun);
}

}  // namespace rank_faults
