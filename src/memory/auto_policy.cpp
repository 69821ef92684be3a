#include "frugal/memory/auto_policy.h"

#include <fmt/format.h>

#include "frugal/memory/meta_trace.h"
#include "frugal/memory/planner.h"
#include "frugal/memory/stats.h"
#include "frugal/strategy/precision.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::memory {
namespace {

constexpr const char* kKey = "strategy.checkpointing.memory_budget";

// In the order of their cost in time: each recomputes more, or copies more, than the one before.
std::vector<PolicyCandidate> candidates(const CheckpointingConfig& given) {
  std::vector<PolicyCandidate> out;
  auto add = [&](const std::string& policy, bool offload) {
    PolicyCandidate c;
    c.checkpointing = given;
    c.checkpointing.policy = policy;
    c.offload_activations = offload;
    out.push_back(c);
  };
  add("none", false);
  add("selective", false);
  add("every_k", false);
  add("full", false);
  add("full", true);
  return out;
}

}  // namespace

std::string PolicyCandidate::label() const {
  std::string s = checkpointing.policy;
  if (checkpointing.policy == "every_k") s += fmt::format(" (k {})", checkpointing.k);
  if (checkpointing.policy == "selective") {
    s += " (";
    for (size_t i = 0; i < checkpointing.targets.size(); ++i) s += (i ? ", " : "") + checkpointing.targets[i];
    s += ")";
  }
  if (offload_activations) s += " + activation offload";
  return s;
}

int64_t auto_policy_budget(const Config& cfg, const c10::Device& device) {
  const MemoryAmount& b = cfg.strategy.checkpointing.memory_budget;
  if (b.bytes > 0) return b.bytes;
  const int64_t limit = memory_limit(device, cfg.memory.budget);
  if (b.fraction > 0) return static_cast<int64_t>(b.fraction * static_cast<double>(limit));
  if (device.is_cuda()) return limit;
  if (cfg.memory.budget > 0) return cfg.memory.budget;
  throw Error(fmt::format(
      "strategy.checkpointing.policy: auto on the CPU needs a budget to fit: set {} (e.g. 8GiB) "
      "or memory.budget",
      kKey));
}

AutoPolicyChoice choose_checkpointing(const Config& given, const c10::Device& device, int world_size) {
  Config cfg = given;
  cfg.strategy.precision = resolve_precision(cfg.strategy.precision, device);
  AutoPolicyChoice choice;
  choice.budget = auto_policy_budget(cfg, device);
  ModelProfile profile = model_shape(cfg);
  if (!profile.has_blocks) {
    throw Error("strategy.checkpointing.policy: auto needs a model with blocks to checkpoint (" +
                cfg.model.type + " has none); use policy none");
  }
  for (PolicyCandidate c : candidates(cfg.strategy.checkpointing)) {
    TraceSettings s;
    s.precision = cfg.strategy.precision;
    s.checkpointing = c.checkpointing;
    s.offload_activations = c.offload_activations;
    s.activation_prefetch = cfg.strategy.offload.activation_prefetch;
    s.loss_chunk_tokens = cfg.model.loss_chunk_tokens;
    s.micro_batch = cfg.data.micro_batch_size;
    std::string why;
    const auto trace = trace_step(cfg, s, &why);
    if (!trace) {
      throw Error("strategy.checkpointing.policy: auto cannot trace this model on the meta device (" +
                  why + "); choose a policy by hand (frugal plan --measure shows each one's peak)");
    }
    PlanRow row;
    row.precision = cfg.strategy.precision;
    row.checkpointing = c.label();  // the key the traced figures are filed under
    row.offload_activations = false;
    row.loss_chunk_tokens = 0;
    row.sharding = cfg.strategy.sharding.mode;
    row.offload = static_cast<bool>(cfg.strategy.offload.optimizer);
    row.nvme = cfg.strategy.offload.optimizer.where == OptimizerPlace::nvme;
    row.optimizer = cfg.optim.type;
    row.in_backward = cfg.optim.in_backward;
    row.micro_batch = cfg.data.micro_batch_size;
    const ActivationKey key{row.precision, row.checkpointing, false, false};
    profile.activations[key.str()] = trace->activation_peak;
    profile.activations_alone[key.str()] = trace->activation_peak_alone;
    c.predicted_peak = predict_peak(profile, row, world_size);
    choice.considered.push_back(c);
    if (static_cast<double>(c.predicted_peak) <= kAutoPolicyFill * static_cast<double>(choice.budget)) {
      choice.fits = true;
      break;
    }
  }
  return choice;
}

void resolve_auto_checkpointing(Config& cfg, const c10::Device& device, int world_size) {
  if (cfg.strategy.checkpointing.policy != kAutoCheckpointing) return;
  const AutoPolicyChoice choice = choose_checkpointing(cfg, device, world_size);
  std::string considered;
  for (const auto& c : choice.considered) {
    considered += fmt::format("{}{} {}", considered.empty() ? "" : ", ", c.label(), format_bytes(c.predicted_peak));
  }
  const PolicyCandidate& chosen = choice.chosen();
  if (choice.fits) {
    log::info(fmt::format("strategy.checkpointing auto: {} (predicted peak per rank; budget {}, "
                          "filled to {:.0f}%: {})",
                          chosen.label(), format_bytes(choice.budget), 100 * kAutoPolicyFill, considered));
  } else {
    log::warn(fmt::format("strategy.checkpointing auto: nothing fits {} ({}); taking the smallest, {}: "
                          "frugal plan shows what else would (sharding, offload, a smaller micro-batch)",
                          format_bytes(choice.budget), considered, chosen.label()));
  }
  cfg.strategy.checkpointing = chosen.checkpointing;
  cfg.strategy.offload.activations = chosen.offload_activations;
}

}  // namespace frugal::memory
