#include "frugal/train/run_dir.h"

#include <fmt/format.h>

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

}  // namespace

RunDirPlan prepare_run_dir(const Config& cfg, bool create) {
  RunDirPlan plan;
  plan.dir = fs::path(cfg.run.dir) / cfg.run.name;
  const std::string& resume = cfg.run.resume;

  if (resume != "never" && resume != "auto") {
    const fs::path ckpt(resume);
    if (!fs::exists(ckpt / "manifest.json")) {
      throw Error(fmt::format("run.resume: '{}' is not a complete checkpoint directory", resume));
    }
    plan.resume_from = ckpt;
  } else if (resume == "auto") {
    plan.resume_from = latest_checkpoint(plan.dir / "checkpoints");
  }

  if (plan.resume_from) {
    if (create) fs::create_directories(plan.dir);
    return plan;
  }
  if (non_empty_dir(plan.dir)) {
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
  if (create) fs::create_directories(plan.dir);
  return plan;
}

}  // namespace frugal
