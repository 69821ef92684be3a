// Instruction samples for tests: a tokenized JSONL file of random token ids, each sample's
// first tokens not learned (label -100), as data.type tokenized reads it.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "support/helpers.h"
#include "support/model_configs.h"

namespace frugal::test {

// `count` samples of 4 to 40 random tokens below `vocab`, the first 1 to n - 1 of them not
// learned; the same file for the same seed.
inline void write_tokenized_samples(const std::filesystem::path& file, int count = 64,
                                    int vocab = 64, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::ofstream out(file);
  for (int i = 0; i < count; ++i) {
    const int n = 4 + static_cast<int>(rng() % 37), k = 1 + static_cast<int>(rng() % (n - 1));
    nlohmann::json ids = nlohmann::json::array(), labels = nlohmann::json::array();
    for (int t = 0; t < n; ++t) {
      ids.push_back(static_cast<int>(rng() % static_cast<unsigned>(vocab)));
      labels.push_back(t < k ? -100 : ids.back().get<int>());
    }
    out << nlohmann::json{{"input_ids", ids}, {"labels", labels}}.dump() << "\n";
  }
}

// `frugal train` arguments for a tiny Llama (vocabulary 64, context 48) on tokenized samples
// `data`, its runs under `runs`, one metrics row a step, no validation or sample.
inline std::string tiny_llama_tokenized_args(const std::filesystem::path& runs,
                                             const std::filesystem::path& data) {
  return "train --set run.dir=" + quote(runs.string()) + " " +
         transformer_sets("llama", 2, 2, 32, 48, 64) +
         " --set model.size= --set model.dropout=0 --set data.type=tokenized"
         " --set data.path=" +
         quote(data.string()) +
         " --set data.num_workers=0 --set train.progress=none --set generate.tokens=0"
         " --set train.eval_batches=0 --set run.seed=3 --set data.val_fraction=0"
         " --set train.log_every=1";
}

}  // namespace frugal::test
