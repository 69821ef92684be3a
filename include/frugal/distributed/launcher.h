// `frugal launch` (apps/frugal/launch_cmd.cpp is its command line): starts the ranks of a job
// on this node with torchrun's environment contract
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT), and supervises them:
//   - every output line of rank N is printed with a "[rank N] " prefix (stdout to stdout,
//     stderr to stderr);
//   - SIGINT / SIGTERM to the launcher are forwarded to every rank;
//   - when a rank fails, the others get SIGTERM, then SIGKILL after the grace period, and the
//     launcher exits with the failing rank's code (128 + signal when it was killed), naming it;
//   - with max_restarts > 0 a failed job is started again (all ranks), up to that many times;
//     `frugal train` commands are then resumed from their newest checkpoint.
// Ranks die with the launcher (PR_SET_PDEATHSIG), so a killed launcher leaves no orphans.
#pragma once

#include <string>
#include <vector>

namespace frugal::dist {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: a free port of this machine (single-node jobs)
  int max_restarts = 0;
  double grace_s = 10.0;
  // What each rank runs: a frugal subcommand and its arguments ("train", "cfg.yaml", ...),
  // or a program (a path containing '/', or a name found on PATH) and its arguments.
  std::vector<std::string> command;
  // frugal's subcommands: a bare first word that is one of them runs frugal itself.
  std::vector<std::string> frugal_commands;
  // The frugal executable those run ("": this process's own, as `frugal launch` is).
  std::string frugal_executable;
  // Where the ranks' prefixed lines go (file descriptors): stdout and stderr by default.
  int out_fd = 1;
  int err_fd = 2;
};

// Runs the job; returns the exit code for the launcher (0 when every rank succeeded).
int launch(const LaunchOptions& options);

}  // namespace frugal::dist
