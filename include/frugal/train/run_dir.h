// The run directory <run.dir>/<run.name>: config.resolved.yaml, metrics.jsonl, train.log,
// checkpoints/. Deciding what to do with an existing one is here, in one place:
//   resume: never  an existing, non-empty run directory is an error unless overwrite: true
//   resume: auto   continue from its newest checkpoint; without one, as `never`
//   resume: PATH   continue from that checkpoint directory
#pragma once

#include <filesystem>
#include <optional>

#include "frugal/config/config.h"

namespace frugal {

struct RunDirPlan {
  std::filesystem::path dir;
  std::optional<std::filesystem::path> resume_from;  // checkpoint directory to load
};

// Decides, and creates the directory (removing the old one only when run.overwrite is true).
// With create = false it only decides, raising the same errors: the other ranks of a job,
// while rank 0 creates.
RunDirPlan prepare_run_dir(const Config& cfg, bool create = true);

}  // namespace frugal
