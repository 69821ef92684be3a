// A hash of what decides the numbers training produces, to refuse (or warn about) resuming a
// run under a different configuration. Paths, names, logging, checkpoint cadence and loader
// parallelism don't change the numbers, so they are left out; model.size is left out because
// the sizes it expands to are hashed themselves, and the model keys its type does not read.
//
// strategy is hashed whole (precision and the grad scaler change the numbers; accumulation
// changes the batch an optimizer step sees) except strategy.checkpointing: recomputing
// activations gives the same numbers for less memory, so a run that runs out of memory must be
// resumable with checkpointing turned on (and back off). memory.* only observes and frees
// caches, so it stays out too, like every section not named here.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <vector>

#include "frugal/config/load.h"
#include "internal.h"

namespace frugal {

namespace {

// What the fingerprint hashes: keep(section, key) for the dumps of `config`.
std::function<bool(std::string_view, std::string_view)> fingerprinted(const Config& config) {
  return [&config](std::string_view section, std::string_view key) {
    // Only the keys the model type reads: another type's sizes (or keys added for one
    // later) never change a run's fingerprint.
    if (section == "model" || section.substr(0, 6) == "model.") {
      return key != "size" && config_detail::key_is_read(config, section, key);
    }
    // How a step's global batch is cut (micro-batches x accumulation x ranks) does not
    // change what is computed: the trainer checks the global batch itself at resume.
    if (section == "data") {
      return key != "num_workers" && key != "pin_memory" && key != "micro_batch_size" &&
             key != "allow_tokenizer_mismatch";
    }
    if (section == "strategy" && key == "accumulation") return false;
    // None of these changes what is computed (offload steps the same values elsewhere);
    // sharded checkpoints reshard across zero modes.
    if (section == "strategy.checkpointing" || section == "strategy.sharding" ||
        section == "strategy.offload") {
      return false;
    }
    // By top-level section, so a sub-section added later is hashed with its parent.
    const std::string_view top = section.substr(0, section.find('.'));
    return top == "model" || top == "data" || top == "optim" || top == "schedule" ||
           top == "strategy";
  };
}

}  // namespace

std::vector<std::string> fingerprint_differences(const Config& saved, const Config& ours) {
  const auto a = config_detail::dump_fields(saved, fingerprinted(saved));
  const auto b = config_detail::dump_fields(ours, fingerprinted(ours));
  std::map<std::string, std::string> theirs(a.begin(), a.end());
  std::map<std::string, std::string> mine(b.begin(), b.end());
  std::vector<std::string> out;
  for (const auto& [key, value] : a) {
    const auto it = mine.find(key);
    if (it == mine.end()) {
      out.push_back(fmt::format("{}: {} in the checkpoint, not read here", key, value));
    } else if (it->second != value) {
      out.push_back(fmt::format("{}: {} in the checkpoint, {} here", key, value, it->second));
    }
  }
  for (const auto& [key, value] : b) {
    if (!theirs.contains(key)) {
      out.push_back(fmt::format("{}: not in the checkpoint, {} here", key, value));
    }
  }
  return out;
}

std::string config_fingerprint(const Config& config) {
  const std::string text = config_detail::dump(config, fingerprinted(config));
  // FNV-1a, 64 bits: tiny, stable across platforms and releases (std::hash is neither).
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace frugal
