#include "frugal/train/checkpoint_source.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "frugal/config/hf_config.h"
#include "frugal/config/load.h"
#include "frugal/distributed/sharded_state.h"
#include "frugal/io/checkpoint_meta.h"
#include "frugal/train/run_model.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal {

using io::NamedTensors;

// The run's settings, from the checkpoint's meta.json (the resolved config it trained with).
Config checkpoint_config(const fs::path& dir, const Checkpoint& ckpt, const std::string& format) {
  const std::string what = (dir / "meta.json").string();
  const nlohmann::json meta = io::checkpoint_meta(ckpt, dir);
  if (!meta.is_object() || !meta.contains("config")) {
    throw Error(what + ": no config (written by an older frugal); --format " + format +
                " needs the model's settings");
  }
  if (!meta["config"].is_string())
    throw Error(what + ": config: expected the resolved YAML as a string");
  return resolved_config(meta["config"].get<std::string>(), what);
}

// A run directory means its newest checkpoint; a checkpoint directory means itself.
fs::path resolve_checkpoint(const fs::path& source, const std::string& command) {
  if (fs::exists(source / "manifest.json")) return source;
  if (auto latest = latest_checkpoint(source / "checkpoints")) return *latest;
  throw Error(fmt::format("{}: '{}' is neither a checkpoint nor a run directory with one", command,
                          source.string()));
}

NamedTensors checkpoint_weights(const fs::path& dir, dist::CheckpointReader& reader) {
  return io::read_all(reader.weights(), dir.string());
}

SourceModel load_source_model(const fs::path& source, const std::string& command) {
  SourceModel out;
  const bool folder = fs::exists(source / "config.json") && !fs::exists(source / "manifest.json") &&
                      !fs::exists(source / "checkpoints");
  if (folder) {
    out.cfg.model = hf::read_model_config(source);
    out.cfg.model.init_from = source.string();
    out.model = build_run_model(out.cfg);
    return out;
  }
  const fs::path ckpt_dir = resolve_checkpoint(source, command);
  verify_checkpoint(ckpt_dir);
  dist::CheckpointReader reader(ckpt_dir, /*rank=*/0);
  out.cfg = checkpoint_config(ckpt_dir, reader.checkpoint(), command);
  out.model = restore_run_model(out.cfg, checkpoint_weights(ckpt_dir, reader),
                                (ckpt_dir / "model.pt").string());
  return out;
}

}  // namespace frugal
