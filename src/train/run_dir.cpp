#include "frugal/train/run_dir.h"

#include <fmt/format.h>

#include "frugal/io/atomic_file.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/remove_tree.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

bool non_empty_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && !fs::is_empty(p, ec);
}

// A rejected checkpoint stays for its owner to look at, under a name no reader takes for a
// checkpoint, and out of the way of the one the resumed run will write at its step.
// The run directory and its missing parents; one that cannot be made (run.dir is a file, a
// read-only place) is the config's problem, said with its key.
void make_run_dir(const fs::path& dir) {
  try {
    io::create_directories(dir);
  } catch (const Error& e) {
    throw Error(fmt::format("run.dir: {}", e.what()));
  }
}

fs::path move_aside(const fs::path& ckpt) {
  fs::path aside = ckpt.string() + ".rejected";
  for (int n = 2; fs::exists(fs::symlink_status(aside)); ++n) {
    aside = fmt::format("{}.rejected-{}", ckpt.string(), n);
  }
  std::error_code ec;
  fs::rename(ckpt, aside, ec);
  if (ec) {
    throw Error(fmt::format("run.resume: auto: cannot move the rejected checkpoint '{}' aside: {}",
                            ckpt.string(), ec.message()));
  }
  return aside;
}

// resume: auto. The newest checkpoint that verifies (every file's size and hash, every shard);
// newer ones that do not are named with the reason and, when `create`, moved aside.
std::optional<fs::path> resume_auto(const fs::path& checkpoints, bool create,
                                    const CheckpointVerifier& verify,
                                    std::vector<std::string>& warnings) {
  RejectedCheckpoints rejected;
  const auto valid = newest_valid_checkpoint(checkpoints, &rejected, verify);
  if (rejected.empty()) return valid;
  if (!valid) {
    throw Error(fmt::format(
        "run.resume: auto: no valid checkpoint in '{}' (the newest: {}); set run.overwrite=true "
        "to start the run over, or resume from another one with run.resume=DIR",
        checkpoints.string(), rejected.front().second));
  }
  for (const auto& [path, why] : rejected) {
    std::string line =
        fmt::format("run.resume: auto: rejected checkpoint '{}': {}", path.string(), why);
    if (create) line += fmt::format("; moved aside to '{}'", move_aside(path).string());
    warnings.push_back(std::move(line));
  }
  warnings.push_back(fmt::format("run.resume: auto: resuming from '{}', the newest valid checkpoint",
                                 valid->string()));
  return valid;
}

}  // namespace

RunDirPlan prepare_run_dir(const Config& cfg, bool create, const CheckpointVerifier& verify) {
  RunDirPlan plan;
  plan.dir = fs::path(cfg.run.dir) / cfg.run.name;
  const std::string& resume = cfg.run.resume;

  if (resume != "never" && resume != "auto") {
    const fs::path ckpt(resume);
    if (!fs::exists(ckpt / "manifest.json")) {
      throw Error(fmt::format("run.resume: '{}' is not a complete checkpoint directory", resume));
    }
    // The checkpoint asked for, or an error naming its bad file: never another one instead.
    try {
      if (verify) verify(ckpt); else verify_checkpoint(ckpt);
    } catch (const Error& e) {
      throw Error(fmt::format("run.resume: {}", e.what()));
    }
    plan.resume_from = ckpt;
  } else if (resume == "auto") {
    plan.resume_from = resume_auto(plan.dir / "checkpoints", create, verify, plan.warnings);
  }

  if (plan.resume_from) {
    if (create) make_run_dir(plan.dir);
    return plan;
  }
  plan.fresh = !non_empty_dir(plan.dir);
  if (!plan.fresh) {
    if (!cfg.run.overwrite) {
      const bool has_checkpoint = latest_checkpoint(plan.dir / "checkpoints").has_value();
      throw Error(fmt::format(
          "run directory '{}' already exists{}; choose another run.name, or set "
          "run.overwrite=true to replace it",
          plan.dir.string(),
          has_checkpoint ? " (set run.resume=auto to continue it from its newest checkpoint)"
                         : " and holds no checkpoint to resume from"));
    }
    if (!create) return plan;
    log::warn(fmt::format("run.overwrite: replacing '{}'", plan.dir.string()));
    io::remove_tree(plan.dir);
  }
  if (create) {
    for (fs::path p = plan.dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
      plan.created = p;
      if (p == p.parent_path()) break;
    }
    make_run_dir(plan.dir);
  }
  return plan;
}

}  // namespace frugal
