// `frugal plan CFG --gpus N --gpu-memory 80GiB` (or --nodes K --gpus-per-node G, which adds
// hsdp within each node): predicted per-rank peak memory and bytes sent per step of every
// strategy combination (precision x checkpointing x activation offload x chunked loss x
// sharding x optimizer offload x optimizer x optimizer-in-backward x micro-batch), and those
// that fit ranked by an estimate of time per sample.
//
// Fine-tuning: gradients, optimizer state and offloaded masters are the trained parameters'
// alone; the frozen ones (fp32, or NF4 at ~0.52 B each) add their bytes: whole on each rank,
// but for the fp32 ones under a mode that shards parameters (divided by N, plus the root unit's
// and two blocks' gathered at once).
// Peak = parameters + gradients (whole, sharded, or only a block's in flight with
// optim.in_backward) + optimizer state (per optimizer: AdamW 8 B/parameter, 8-bit AdamW ~2,
// Adafactor rows + columns, SGD 0 or 4; divided by N as the sharding mode's traits say,
// frugal::sharding_traits; moved to the host by offload) + activations.
//
// Activations come from one micro-step per precision x checkpointing x loss chunking traced
// on the meta device (meta_trace.h): the model is never built in real memory and nothing is
// computed, so an 8B model plans in seconds. A model the trace cannot run (an operator with
// no meta kernel) is measured instead: one real micro-step each, at the config's size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

// Which activation memory a row's strategies leave: the key of ModelProfile::activations.
struct ActivationKey {
  std::string precision = "fp32";     // fp32 | bf16-mixed
  std::string checkpointing = "none";  // none | full
  bool offload = false;                // strategy.offload.activations (with full: inputs on the host)
  bool chunked_loss = false;           // model.loss_chunk_tokens > 0
  std::string str() const;
};

struct ModelProfile {
  // What trains (model.lora, model.quantize_base, model.freeze applied on the meta model):
  // full | lora | qlora | partial, and the --set settings that select it from the config
  // ("" for the config's own; finetune_variants).
  std::string finetune = "full";
  std::string finetune_settings;
  int64_t params = 0;          // trained parameters
  int64_t frozen = 0;          // frozen values: parameters that never train, and NF4 weights
  int64_t frozen_bytes = 0;    // what they hold: 4 B each as fp32 parameters, NF4's bytes
  int64_t nf4_values = 0;      // of which quantized to NF4 (model.quantize_base)...
  int64_t nf4_bytes = 0;       // ...in these bytes (codes, scales and their scales)
  int64_t largest_block = 0;   // parameters of the largest block
  int64_t root = 0;            // parameters outside the blocks
  // The frozen fp32 parameters' share of the above (NF4 weights not counted).
  int64_t frozen_largest_block = 0;
  int64_t frozen_root = 0;
  // Frozen linear weights (not NF4), which model.frozen_dtype auto stores in autocast's dtype
  // under a mixed precision (frozen_follows_autocast).
  int64_t frozen_linear = 0;
  bool frozen_follows_autocast = false;
  bool has_blocks = false;     // the model names block lists (checkpointing applies)
  int64_t adafactor_state_bytes = 0;  // Adafactor's moments for these parameters (optim.beta1 counted)
  int64_t measured_batch = 0;  // micro-batch of the traces / measurements
  int64_t loss_chunk_tokens = 0;  // the chunk the chunked-loss rows use (0: the model has none)
  bool traced = true;          // false: measured with real steps (the trace could not run)
  std::string why_measured;    // the trace's failure, when measured
  // Activation bytes of one micro-step (peak - parameters - gradients), by ActivationKey::str().
  std::map<std::string, int64_t> activations;
  // The same with each gradient dropped once accumulated (peak - parameters): what rows whose
  // gradients are sharded or stepped in backward add to their resident state.
  std::map<std::string, int64_t> activations_alone;
  bool host_is_device = true;  // CPU runs: offloaded state lands on the same memory
};

struct PlanRow {
  std::string finetune = "full";   // the profile's (ModelProfile::finetune)
  std::string finetune_settings;   // the profile's --set settings, ahead of the row's own
  std::string precision = "fp32";
  std::string checkpointing = "none";
  bool offload_activations = false;
  int64_t loss_chunk_tokens = 0;
  std::string sharding = "none";
  bool offload = false;  // strategy.offload.optimizer (ram, or nvme below)
  std::string optimizer = "adamw";
  bool in_backward = false;  // optim.in_backward
  int64_t micro_batch = 1;
  bool nvme = false;  // offload with the masters and the state on disk (offload.optimizer nvme)
  // Modes replicated across groups (hsdp): ranks per shard group, one node's (0 otherwise);
  // the peak divides what is sharded by it rather than by the world.
  int shard_size = 0;
  int64_t comm_bytes = 0;        // predicted bytes each rank sends per optimizer step
  int64_t comm_across_bytes = 0; // of which between shard groups (hsdp: across nodes)
  int64_t peak_bytes = 0;        // predicted, per rank
  int64_t host_bytes = 0;        // predicted host memory the optimizer offload takes, per rank
  int64_t disk_bytes = 0;        // predicted state on disk (nvme rows), per rank
  double time_per_sample = 0.0;  // relative estimate (lower is faster)
  bool fits = false;
  // The settings of this row, as --set arguments ("strategy.precision=bf16-mixed ...").
  std::string settings() const;
};

struct PlanOptions {
  int gpus = 1;       // ranks in all (nodes x gpus_per_node when those are given)
  int nodes = 1;      // several: modes replicated across groups (hsdp) are planned too, with
  int gpus_per_node = 0;  // shard groups of one node's ranks
  int64_t gpu_memory = 80LL << 30;
  // The user's optimizer (optim.type) and micro-batch stay as the config has them unless these
  // ask to vary them too: a plan changes how a run fits, not what it trains.
  bool vary_optimizer = false;
  bool vary_micro_batch = false;
  bool vary_finetune = false;  // also full fine-tuning, LoRA and QLoRA (finetune_variants)
  std::vector<int64_t> micro_batches;  // with vary_micro_batch; empty: the config's x 1/2, 1, 2, 4
};

// The configs a plan profiles: the config itself and, with vary_finetune, the same model fully
// fine-tuned, with LoRA (the config's adapters, else rank 8 on the type's default targets) and
// with QLoRA (those adapters on an NF4 base), each with the profile label and settings that
// select it.
struct FinetuneVariant {
  Config cfg;
  std::string label;
  std::string settings;
};
std::vector<FinetuneVariant> finetune_variants(const Config& cfg, bool vary);

// The parameters' counts (trained, frozen, NF4, largest block, root, Adafactor's state), from
// the model built on the meta device with its fine-tuning applied; no activations yet.
ModelProfile model_shape(const Config& cfg);
// Traces (or, where the trace cannot run, measures) one micro-step per activation key at the
// config's micro-batch, for the config's device. measure = true always measures.
ModelProfile profile_model(const Config& cfg, bool measure = false);
int64_t predict_peak(const ModelProfile& profile, const PlanRow& row, int world);

// Where optimizer offload puts a row's masters and state, per rank: host memory (ram: masters,
// their gradients and the state; nvme: the ring of `buffer_bytes` and one record's gradients)
// and disk (nvme: masters and state).
struct OffloadBytes {
  int64_t host = 0;
  int64_t disk = 0;
};
OffloadBytes predict_offload(const ModelProfile& profile, const PlanRow& row, int world,
                             int64_t buffer_bytes);

// What offload.optimizer nvme adds to a step for `cfg` at a disk's measured bandwidths (bytes
// per second), at one rank (zero1/2/3 divide it by the ranks): the bytes each step reads and
// writes (the masters and the state), and the seconds to read and then write them (the ring
// keeps both in flight, so a disk often does better: bench/nvme).
struct NvmeStepCost {
  int64_t state_bytes = 0;
  double seconds = 0.0;
};
NvmeStepCost predict_nvme_step(const Config& cfg, double read_bytes_per_s,
                               double write_bytes_per_s);
// Every combination, predicted; fitting rows first, by time_per_sample.
std::vector<PlanRow> plan(const Config& cfg, const ModelProfile& profile, const PlanOptions& o);
// Fitting rows first, fastest first, then the smaller peak: plan's order, for rows merged from
// several profiles.
void rank_rows(std::vector<PlanRow>& rows);

}  // namespace frugal::memory
