#include "frugal/memory/oom_advice.h"

#include <fmt/format.h>

#include "frugal/engine/sharding_registry.h"
#include "frugal/memory/stats.h"
#include "frugal/models/model_spec.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/precision.h"

namespace frugal::memory {

std::vector<std::string> oom_advice(const Config& cfg, const OomFigures& f) {
  std::vector<std::string> out;
  // What the step added before failing: activations and temporaries (a lower bound).
  const int64_t activations = std::max<int64_t>(0, f.peak_bytes - f.state_bytes);
  const auto& s = cfg.strategy;
  if (f.reserved_bytes > f.allocated_bytes + (f.allocated_bytes / 4)) {
    out.push_back(fmt::format(
        "fragmentation: {} reserved but unused by tensors; PYTORCH_CUDA_ALLOC_CONF="
        "expandable_segments:True lets the allocator reuse it",
        format_bytes(f.reserved_bytes - f.allocated_bytes)));
  }
  // Cheapest first: what costs (almost) no time, then what recomputes or copies, then what
  // needs more ranks or the host.
  const std::optional<ModelSpec> spec = find_model_spec(cfg.model.type);
  const bool chunked_loss = spec && spec->chunked_loss();
  if (chunked_loss && cfg.model.loss_chunk_tokens == 0) {
    // The logits and their gradient, B x T x V floats each, never exist whole.
    const int64_t logits = 8 * cfg.data.micro_batch_size * cfg.model.block_size * cfg.model.vocab_size;
    out.push_back(fmt::format("the chunked loss would save up to ~{} of logits "
                              "(model.loss_chunk_tokens: 256; the output projection is "
                              "recomputed per chunk)",
                              format_bytes(std::min(logits, activations))));
  }
  const bool adam = cfg.optim.type == "adam" || cfg.optim.type == "adamw";
  if (!cfg.optim.in_backward && cfg.optim.clip_grad_norm == 0 &&
      !precision_spec(s.precision).loss_scaling && !s.offload.optimizer) {
    // Gradients are 4 of the 16 bytes per parameter of Adam's state.
    out.push_back(fmt::format("stepping in backward would free ~{} of gradients as they are "
                              "made (optim.in_backward: true)",
                              format_bytes(adam ? f.state_bytes / 4 : f.state_bytes / 3)));
  }
  if (adam && !s.offload.optimizer) {
    // Two fp32 moments (8 of 16 bytes per parameter) become two 1-byte ones plus a scale.
    out.push_back(fmt::format("8-bit AdamW would save ~{} of optimizer state "
                              "(optim.type: adamw8bit)",
                              format_bytes(f.state_bytes * 6 / 16)));
  }
  if (!precision_spec(s.precision).autocast) {
    out.push_back(fmt::format("bf16-mixed would save ~{} of activations "
                              "(strategy.precision: bf16-mixed)", format_bytes(activations / 2)));
  }
  if (!checkpointing_enabled(s.checkpointing)) {
    // Measured on GPT blocks (docs/benchmarks.md): full checkpointing keeps 16-21%.
    out.push_back(fmt::format("checkpointing every block would save ~{} "
                              "(strategy.checkpointing: full; one more forward per step)",
                              format_bytes(activations * 3 / 4)));
  }
  if (checkpointing_enabled(s.checkpointing) && !s.offload.activations) {
    // With checkpointing, what is left is mostly the blocks' inputs, which can wait on the host.
    out.push_back(fmt::format("activation offload would move the checkpointed blocks' inputs "
                              "(most of the ~{} left) to host memory "
                              "(strategy.offload.activations: true)",
                              format_bytes(activations)));
  }
  if (cfg.data.micro_batch_size > 1) {
    const int64_t half = cfg.data.micro_batch_size / 2;
    out.push_back(fmt::format("half the micro-batch with twice the accumulation keeps the "
                              "global batch and saves ~{} (data.micro_batch_size: {}, "
                              "strategy.accumulation: {}; or frugal find-batch)",
                              format_bytes(activations / 2), half, s.accumulation * 2));
  }
  const int ranks = std::max(4, f.world_size * 2);
  if (!sharding_traits(s.sharding.mode).shards_parameters) {
    out.push_back(fmt::format("zero3 over {} ranks would hold ~{} of model state per rank "
                              "instead of ~{} (strategy.sharding: zero3, frugal launch)",
                              ranks, format_bytes(f.state_bytes / ranks),
                              format_bytes(f.state_bytes)));
  }
  if (!s.offload.optimizer && !s.offload.params && cfg.optim.type != "sgd") {
    // Adam keeps two moments per parameter: half of a 16-byte-per-parameter state.
    out.push_back(fmt::format("offloading the optimizer would move ~{} to host memory "
                              "(strategy.offload.optimizer: true)", format_bytes(f.state_bytes / 2)));
  }
  return out;
}

}  // namespace frugal::memory
