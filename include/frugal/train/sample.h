// The text sample at the end of a run (generate.tokens > 0): a byte-level GPT continues
// generate.prompt, seeded by run.seed. Empty for other models.
#pragma once

#include <string>

#include "frugal/config/config.h"
#include "frugal/models/model.h"

namespace frugal {

std::string sample_text(const Config& cfg, Model& model, c10::Device device);

}  // namespace frugal
