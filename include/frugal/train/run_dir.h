// The run directory <run.dir>/<run.name>: config.resolved.yaml, metrics.jsonl, train.log,
// checkpoints/. Deciding what to do with an existing one is here, in one place:
//   resume: never  an existing, non-empty run directory is an error unless overwrite: true
//   resume: auto   continue from its newest valid checkpoint (verified: sizes and hashes of
//                  every file and shard); newer ones that fail are named in `warnings` and moved
//                  aside (<step dir>.rejected); without any checkpoint, as `never`
//   resume: PATH   continue from that checkpoint directory, verified first: a bad file is an
//                  error naming it
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/io/checkpoint.h"

namespace frugal {

struct RunDirPlan {
  std::filesystem::path dir;
  std::optional<std::filesystem::path> resume_from;  // checkpoint directory to load
  std::vector<std::string> warnings;  // what resume: auto rejected, and what it took instead
  // This run made the directory (it was not there, or was empty): a start that fails before
  // writing anything of its own removes it again, so that the same command can be rerun.
  bool fresh = false;
  // The outermost folder this start created (the run directory, or run.dir above it when that
  // was missing too): what a start that fails is removed up to, so it leaves nothing behind.
  std::filesystem::path created;
};

// Decides, and creates the directory (removing the old one only when run.overwrite is true).
// With create = false it only decides, raising the same errors: the other ranks of a job,
// while rank 0 creates.
// `verify` checks a checkpoint before it is taken (by default io's verify_checkpoint; a job
// passes dist::verify_checkpoint_together, so that its ranks share the reading and agree).
RunDirPlan prepare_run_dir(const Config& cfg, bool create = true,
                           const CheckpointVerifier& verify = {});

}  // namespace frugal
