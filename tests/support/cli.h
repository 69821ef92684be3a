// Running the frugal CLI in tests.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/helpers.h"
#include "support/model_configs.h"

namespace frugal::test {

// `frugal ARGS` (ARGS already shell-quoted where needed).
inline CommandResult frugal(const std::string& args, int timeout_s = 600) {
  return run_command(quote(frugal_binary()) + " " + args, timeout_s);
}

// A tiny, fast config (2-layer GPT on synthetic tokens) writing its runs under `runs`.
inline std::string tiny_gpt_yaml(const std::string& runs, const std::string& name,
                                 int max_steps) {
  return "run: {name: " + name + ", dir: '" + runs + "', seed: 3}\n"
         "model: " + transformer_yaml("gpt", 2, 2, 32, 16, 256) + "\n"
         "data: {type: synthetic, micro_batch_size: 4, synthetic_samples: 128}\n"
         "optim: {type: adamw, lr: 0.003}\n"
         "train: {max_steps: " + std::to_string(max_steps) +
         ", log_every: 1, checkpoint_every: 5, progress: lines}\n";
}

// The last JSON object line of a command's output (the one-line results of eval and generate).
inline nlohmann::json last_json_line(const std::string& out) {
  const size_t at = out.rfind("{\"");
  REQUIRE(at != std::string::npos);
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
}

// The training steps' rows of a run's metrics.jsonl (those with a grad_norm), in order.
inline std::vector<nlohmann::json> step_rows(const std::filesystem::path& metrics) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(metrics));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("grad_norm")) out.push_back(j);
  }
  return out;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace frugal::test
