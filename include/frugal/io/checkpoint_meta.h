// A checkpoint's meta.json as JSON (step, data position, fingerprint, the resolved config, the
// shards' layout), for every reader of it.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "frugal/io/checkpoint.h"

namespace frugal::io {

// `dir`: the checkpoint directory, for the error (".../meta.json: corrupt (...)").
nlohmann::json checkpoint_meta(const Checkpoint& ckpt, const std::filesystem::path& dir);

}  // namespace frugal::io
