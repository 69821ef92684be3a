// The text sample at the end of a run (generate.tokens > 0): the model continues
// generate.prompt, seeded by run.seed, encoded and decoded by generate.tokenizer (or the
// tokenizer in model.init_from's folder), or as bytes by a model of 256 tokens. Empty when
// there is no way to turn its tokens into text.
#pragma once

#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/data/tokenizer.h"
#include "frugal/models/model.h"

namespace frugal {

// generate.tokenizer, else the tokenizer in model.init_from's folder, else null (bytes). The
// trainer loads it when the run starts, so a wrong path fails before training, not after.
std::shared_ptr<Tokenizer> sample_tokenizer(const Config& cfg);

std::string sample_text(const Config& cfg, Model& model, c10::Device device,
                        const Tokenizer* tokenizer);

}  // namespace frugal
