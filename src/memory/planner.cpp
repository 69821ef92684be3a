#include "frugal/memory/planner.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/engine/device.h"
#include "frugal/engine/engine.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/meta_trace.h"
#include "frugal/memory/stats.h"
#include "frugal/models/blocks.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/model_spec.h"
#include "frugal/models/quantized_base.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/precision.h"
#include "frugal/util/log.h"

namespace frugal::memory {
namespace {

// The chunk the chunked-loss rows use when the config sets none: a few thousand tokens' logits
// at a time, small next to any block's activations, large enough that the matmuls stay
// efficient.
constexpr int64_t kDefaultLossChunk = 2048;

// Optimizer state, in bytes, for the whole model.
double state_bytes(const std::string& optimizer, const ModelProfile& p) {
  const double psi = static_cast<double>(p.params);
  if (optimizer == "sgd") return 4 * psi;  // momentum
  if (optimizer == "adamw8bit") return 2.03125 * psi;  // two 1-byte moments, fp32 scale / 256
  if (optimizer == "adafactor") return static_cast<double>(p.adafactor_state_bytes);
  return 8 * psi;  // adam, adamw: two fp32 moments
}

// A type whose spec reads model.loss_chunk_tokens has the chunked loss.
bool has_chunked_loss(const ModelConfig& m) {
  const std::optional<ModelSpec> spec = find_model_spec(m.type);
  return spec && spec->chunked_loss();
}

// What a config's fine-tuning keys make of the model, as the label of its rows.
std::string finetune_label(const ModelConfig& m) {
  if (m.quantize_base.type != "none") return "qlora";
  if (m.lora.rank > 0) return "lora";
  if (!m.freeze.empty()) return "partial";
  return "full";
}

std::vector<ActivationKey> keys_for(bool has_blocks, bool chunks) {
  std::vector<ActivationKey> keys;
  for (const std::string precision : {"fp32", "bf16-mixed"}) {
    for (bool chunked : {false, true}) {
      if (chunked && !chunks) continue;
      keys.push_back({precision, "none", false, chunked});
      if (!has_blocks) continue;
      keys.push_back({precision, "full", false, chunked});
      keys.push_back({precision, "full", true, chunked});
    }
  }
  return keys;
}

// One real micro-step for `key` at the config's micro-batch: the fallback for a model the
// meta trace cannot run.
int64_t measure_activations(const Config& cfg, const ActivationKey& key, int64_t loss_chunk,
                            int64_t params) {
  const c10::Device device = resolve_device(cfg.run.device);
  at::manual_seed(cfg.run.seed);
  ModelConfig mc = cfg.model;
  mc.loss_chunk_tokens = key.chunked_loss ? loss_chunk : 0;
  auto model = make_model(mc);
  apply_finetuning(*model, mc);
  model->to(device);
  StrategyConfig sc;
  sc.precision = key.precision;
  sc.checkpointing.policy = key.checkpointing;
  sc.offload.activations = key.offload;
  OptimConfig sgd;  // no state: the step adds nothing to the measurement
  sgd.type = "sgd";
  Engine engine(EngineOptions{sc, 0.0});
  engine.setup(model, make_optimizer(sgd, *model));
  auto data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
  LoaderOptions lo;
  lo.batch_size = micro_batch_items(cfg.data);
  lo.num_workers = 0;
  DataLoader loader(data, lo);
  Batch batch = loader.next().to(device);
  const int64_t before = snapshot(device).allocated;
  reset_peaks(device);
  engine.step(batch, [&](const Batch& mb) { return model->batch_loss_sum(mb); });
  const int64_t peak = snapshot(device).allocated_peak;
  return std::max<int64_t>(0, peak - before - 4 * params);
}

// Adafactor keeps, per parameter of 2 or more dimensions, one fp32 value per row and per
// column of its last two; per vector, the whole second moment.
int64_t adafactor_bytes(const std::vector<at::Tensor>& params) {
  int64_t n = 0;
  for (const auto& t : params) {
    if (t.dim() >= 2) {
      const int64_t outer = t.numel() / (t.size(-1) * t.size(-2));
      n += outer * (t.size(-1) + t.size(-2));
    } else {
      n += t.numel();
    }
  }
  return 4 * n;
}

}  // namespace

std::string ActivationKey::str() const {
  return precision + "/" + checkpointing + (offload ? "+offload" : "") + (chunked_loss ? "/chunked" : "");
}

std::string PlanRow::settings() const {
  std::string s = finetune_settings.empty() ? "" : finetune_settings + " ";
  s += fmt::format("strategy.precision={} strategy.checkpointing={} data.micro_batch_size={}",
                   precision, checkpointing, micro_batch);
  if (offload_activations) s += " strategy.offload.activations=true";
  if (loss_chunk_tokens > 0) s += fmt::format(" model.loss_chunk_tokens={}", loss_chunk_tokens);
  if (sharding != "none") s += " strategy.sharding.mode=" + sharding;
  if (shard_size > 0) s += fmt::format(" strategy.sharding.shard_size={}", shard_size);
  if (offload) s += nvme ? " strategy.offload.optimizer=nvme" : " strategy.offload.optimizer=true";
  s += " optim.type=" + optimizer;
  if (in_backward) s += " optim.in_backward=true";
  return s;
}

std::vector<FinetuneVariant> finetune_variants(const Config& cfg, bool vary) {
  std::vector<FinetuneVariant> out{{cfg, finetune_label(cfg.model), ""}};
  if (!vary) return out;
  // The adapters the LoRA and QLoRA variants use: the config's, else PEFT's usual rank 8.
  LoraConfig lora = cfg.model.lora;
  if (lora.rank == 0) lora = LoraConfig{8, 16.0, 0.0, {}, false};
  const std::string lora_settings =
      fmt::format("model.lora.rank={} model.lora.alpha={}", lora.rank, lora.alpha);
  auto variant = [&](const std::string& label) {
    Config c = cfg;
    c.model.freeze.clear();
    c.model.lora = label == "full" ? LoraConfig{} : lora;
    c.model.quantize_base.type = label == "qlora" ? "nf4" : "none";
    if (label != "qlora") c.model.quantize_base.modules.clear();
    const std::string settings =
        label == "full" ? "model.lora.rank=0 model.quantize_base=none model.freeze=[]"
        : label == "lora" ? lora_settings + " model.quantize_base=none model.freeze=[]"
                          : lora_settings + " model.quantize_base=nf4 model.freeze=[]";
    return FinetuneVariant{c, label, settings};
  };
  for (const std::string label : {"full", "lora", "qlora"}) {
    if (label != out.front().label) out.push_back(variant(label));
  }
  return out;
}

ModelProfile model_shape(const Config& cfg) {
  const c10::Device device = resolve_device(cfg.run.device);
  ModelProfile p;
  p.finetune = finetune_label(cfg.model);
  p.host_is_device = device.is_cpu();
  p.measured_batch = cfg.data.micro_batch_size;
  p.loss_chunk_tokens = !has_chunked_loss(cfg.model) ? 0
                        : cfg.model.loss_chunk_tokens > 0 ? cfg.model.loss_chunk_tokens
                                                          : kDefaultLossChunk;
  {
    // The parameters' shapes, from the model built on the meta device: no memory, no
    // initialisation, whatever its size. Its adapters, NF4 weights and frozen parameters are
    // the run's (apply_finetuning runs on meta tensors as on real ones).
    OnMetaDevice on_meta;
    auto model = make_model(cfg.model);
    apply_finetuning(*model, cfg.model);
    std::vector<at::Tensor> trained;
    for (const auto& t : model->parameters()) {
      if (t.requires_grad()) {
        trained.push_back(t);
        p.params += t.numel();
      } else {
        p.frozen += t.numel();
        p.frozen_bytes += 4 * t.numel();  // kept in fp32, as every parameter
      }
    }
    for (const auto& [name, layer] : linear_layers(*model)) {
      if (const nf4::Nf4Weight* q = nf4_weight_of(*layer)) {
        const auto shape = linear_weight_shape(*layer);
        p.nf4_values += shape.at(0) * shape.at(1);
        p.nf4_bytes += q->bytes();
      }
    }
    p.frozen += p.nf4_values;
    p.frozen_bytes += p.nf4_bytes;
    for (const auto& [name, layer] : linear_layers(*model)) {
      if (layer->weight.defined() && !layer->weight.requires_grad())
        p.frozen_linear += layer->weight.numel();
    }
    p.frozen_follows_autocast = frozen_weights_follow_autocast(cfg.model);
    p.adafactor_state_bytes = adafactor_bytes(trained);
    // optim.beta1 adds a full fp32 first moment.
    if (cfg.optim.beta1 > 0) p.adafactor_state_bytes += 4 * p.params;
    int64_t in_blocks = 0, frozen_in_blocks = 0;
    if (!model->block_lists().empty()) {
      for (const Block& b : list_blocks(*model, model->block_lists(), "plan")) {
        int64_t n = 0, frozen = 0;
        for (const auto& t : b.module->parameters()) (t.requires_grad() ? n : frozen) += t.numel();
        p.largest_block = std::max(p.largest_block, n);
        p.frozen_largest_block = std::max(p.frozen_largest_block, frozen);
        in_blocks += n;
        frozen_in_blocks += frozen;
        p.has_blocks = true;
      }
    }
    p.root = p.params - in_blocks;
    p.frozen_root = p.frozen - p.nf4_values - frozen_in_blocks;
  }
  return p;
}

ModelProfile profile_model(const Config& cfg, bool measure) {
  const c10::Device device = resolve_device(cfg.run.device);
  ModelProfile p = model_shape(cfg);
  const auto keys = keys_for(p.has_blocks, p.loss_chunk_tokens > 0);
  p.traced = !measure;
  if (p.traced) {
    for (const auto& key : keys) {
      TraceSettings s;
      s.precision = key.precision;
      s.checkpointing.policy = key.checkpointing;
      s.offload_activations = key.offload;
      s.activation_prefetch = cfg.strategy.offload.activation_prefetch;
      s.loss_chunk_tokens = key.chunked_loss ? p.loss_chunk_tokens : 0;
      s.micro_batch = p.measured_batch;
      auto r = trace_step(cfg, s, &p.why_measured);
      if (!r) {
        p.traced = false;
        break;
      }
      p.activations[key.str()] = r->activation_peak;
      p.activations_alone[key.str()] = r->activation_peak_alone;
    }
  }
  if (!p.traced) {
    if (!measure) {
      log::warn(fmt::format("plan: the meta-device trace cannot run this model ({}); measuring "
                            "real micro-steps instead", p.why_measured));
    }
    if (device.is_cpu()) install_cpu_tracking();
    for (const auto& key : keys) {
      // A real step keeps its gradients: both figures are the one measurement.
      p.activations[key.str()] = measure_activations(cfg, key, p.loss_chunk_tokens, p.params);
      p.activations_alone[key.str()] = p.activations[key.str()];
    }
  }
  return p;
}

int64_t predict_peak(const ModelProfile& p, const PlanRow& r, int world) {
  // Replicated groups (hsdp) shard within a group of shard_size ranks.
  const double n = std::max(1, r.shard_size > 0 ? std::min(r.shard_size, world) : world);
  const double psi = static_cast<double>(p.params);
  const double unit = static_cast<double>(std::max(p.largest_block, p.root));
  double params = 4 * psi, grads = 4 * psi;
  // Frozen weights (fp32 parameters, NF4 codes): no gradient, no state. model.frozen_dtype
  // auto keeps the frozen linear weights in autocast's dtype under a mixed precision.
  const PrecisionSpec precision = precision_spec(r.precision);
  const double frozen_saving =
      p.frozen_follows_autocast && precision.autocast
          ? static_cast<double>((4 - static_cast<int64_t>(c10::elementSize(precision.dtype))) *
                                p.frozen_linear)
          : 0.0;
  double frozen = static_cast<double>(p.frozen_bytes) - frozen_saving;
  double state = state_bytes(r.optimizer, p);
  const ShardingTraits sharding = sharding_traits(r.sharding);
  if (sharding.shards_optimizer_state) state /= n;
  if (sharding.shards_gradients) {
    grads = grads / n + 4 * unit;  // one unit's whole gradients before their reduce-scatter
  }
  if (sharding.shards_parameters) {
    // The shards, plus the root unit and two blocks gathered at once (prefetch 1).
    params = params / n + 4.0 * static_cast<double>(p.root + 2 * p.largest_block);
    // The fp32 frozen ones are sharded and gathered with their unit too (NF4 stays whole).
    const double frozen_fp32 = 4.0 * static_cast<double>(p.frozen - p.nf4_values) - frozen_saving;
    frozen = static_cast<double>(p.nf4_bytes) + frozen_fp32 / n +
             4.0 * static_cast<double>(p.frozen_root + 2 * p.frozen_largest_block);
  }
  double offloaded = 0;
  if (r.offload) {
    // Host masters of what this rank steps, their gradients and the state move off the device
    // (to disk under nvme, where the host keeps the ring alone).
    // (host_bytes when the row has it: the config's own ring size.)
    const int64_t buffer = static_cast<int64_t>(OffloadConfig{}.buffer_mb * (1 << 20));
    offloaded = static_cast<double>(r.host_bytes > 0 ? r.host_bytes
                                                      : predict_offload(p, r, world, buffer).host);
    state = 0;
  }
  // Whole gradients: the step's peak with all of them alive. Sharded or stepped in backward:
  // the activations' own peak on top of the gradients that stay.
  const bool whole_grads = !sharding.shards_gradients && !r.in_backward;
  const ActivationKey key{r.precision, r.checkpointing, r.offload_activations, r.loss_chunk_tokens > 0};
  const auto& table = whole_grads ? p.activations : p.activations_alone;
  auto it = table.find(key.str());
  const double act = it == table.end() || p.measured_batch == 0
                         ? 0.0
                         : static_cast<double>(it->second) * r.micro_batch / p.measured_batch;
  // Stepped in backward: the gradients in flight are in the activations' own peak.
  if (r.in_backward && !sharding.shards_gradients) grads = 0;
  double peak = params + frozen + grads + state + act;
  if (p.host_is_device) peak += offloaded;  // CPU runs: the host is the device
  return static_cast<int64_t>(peak);
}

OffloadBytes predict_offload(const ModelProfile& p, const PlanRow& r, int world,
                             int64_t buffer_bytes) {
  if (!r.offload) return {};
  const double n = std::max(1, r.shard_size > 0 ? std::min(r.shard_size, world) : world);
  const ShardingTraits sharding = sharding_traits(r.sharding);
  // A rank steps the parameters whose optimizer state it holds.
  const double stepped = sharding.shards_optimizer_state ? static_cast<double>(p.params) / n
                                                         : static_cast<double>(p.params);
  double state = state_bytes(r.optimizer, p);
  if (sharding.shards_optimizer_state) state /= n;
  if (!r.nvme) return {static_cast<int64_t>(8 * stepped + state), 0};
  // The ring: three slots of a third of the buffers, or of the whole state when smaller; one
  // record's gradients beside it (a third of a slot under AdamW: masters, two moments).
  const double disk = 4 * stepped + state;
  const double slot = std::min(static_cast<double>(buffer_bytes) / 3, disk);
  const double grads = slot * 4 * stepped / std::max(disk, 1.0);
  return {static_cast<int64_t>(3 * slot + grads), static_cast<int64_t>(disk)};
}

NvmeStepCost predict_nvme_step(const Config& cfg, double read_bytes_per_s,
                               double write_bytes_per_s) {
  const ModelProfile p = model_shape(cfg);
  const double bytes = 4.0 * static_cast<double>(p.params) + state_bytes(cfg.optim.type, p);
  NvmeStepCost cost;
  cost.state_bytes = static_cast<int64_t>(bytes);
  cost.seconds = bytes / std::max(read_bytes_per_s, 1.0) + bytes / std::max(write_bytes_per_s, 1.0);
  return cost;
}

std::vector<PlanRow> plan(const Config& cfg, const ModelProfile& profile, const PlanOptions& o) {
  std::vector<int64_t> batches = o.micro_batches;
  if (!o.vary_micro_batch) {
    batches = {cfg.data.micro_batch_size};
  } else if (batches.empty()) {
    const int64_t b = cfg.data.micro_batch_size;
    for (int64_t m : {std::max<int64_t>(1, b / 2), b, 2 * b, 4 * b}) {
      if (std::find(batches.begin(), batches.end(), m) == batches.end()) batches.push_back(m);
    }
  }
  // One GPU: no sharding; several: every data-parallel mode, built in or registered; those
  // replicated across groups (hsdp) where there are several nodes of several GPUs, one
  // node's GPUs to a group.
  std::vector<std::string> shardings = {"none"};
  const bool grouped = o.nodes > 1 && o.gpus_per_node > 1 && o.gpus == o.nodes * o.gpus_per_node;
  if (o.gpus > 1) {
    shardings.clear();
    for (const std::string& mode : sharding_names()) {
      const ShardingTraits traits = sharding_traits(mode);
      if (traits.data_parallel && (grouped || !traits.replicated_groups)) shardings.push_back(mode);
    }
  }
  // optim.in_backward steps before any gradient norm exists: only without clipping.
  std::vector<bool> in_backward = {false};
  if (cfg.optim.clip_grad_norm == 0) in_backward.push_back(true);
  std::vector<std::string> optimizers = {"adamw", "adamw8bit", "adafactor", "sgd"};
  if (!o.vary_optimizer) optimizers = {cfg.optim.type};
  std::vector<int64_t> chunks = {0};
  if (profile.loss_chunk_tokens > 0) chunks.push_back(profile.loss_chunk_tokens);
  std::vector<PlanRow> rows;
  for (const std::string precision : {"fp32", "bf16-mixed"}) {
    for (const std::string ckpt : {"none", "full"}) {
      for (bool offload_act : {false, true}) {
        if (offload_act && ckpt == "none") continue;
        for (int64_t chunk : chunks) {
          const ActivationKey key{precision, ckpt, offload_act, chunk > 0};
          if (!profile.activations.count(key.str())) continue;
          for (const auto& sharding : shardings) {
            // Optimizer offload: none, to host memory, or past it to disk.
            for (int where : {0, 1, 2}) {
              const bool offload = where > 0;
              for (const std::string& optimizer : optimizers) {
                // Adafactor's factored moments need whole matrices, not ZeRO's flat shards.
                if (optimizer == "adafactor" && sharding_traits(sharding).shards_optimizer_state) continue;
                for (bool ib : in_backward) {
                  if (ib && offload) continue;  // offload already steps during backward
                  for (int64_t b : batches) {
                    PlanRow r{profile.finetune, profile.finetune_settings, precision, ckpt,
                              offload_act, chunk, sharding, offload, optimizer, ib, b};
                    r.nvme = where == 2;
                    const ShardingTraits traits = sharding_traits(sharding);
                    if (traits.replicated_groups) r.shard_size = o.gpus_per_node;
                    // The gradients' bytes: fp32, or bf16 under bf16-mixed's reduce dtype.
                    const StepTraffic traffic = step_traffic(
                        traits, 4.0 * static_cast<double>(profile.params), o.gpus,
                        r.shard_size > 0 ? r.shard_size : o.gpus);
                    r.comm_bytes = static_cast<int64_t>(traffic.total());
                    r.comm_across_bytes = static_cast<int64_t>(traffic.across);
                    const OffloadBytes moved = predict_offload(
                        profile, r, o.gpus,
                        static_cast<int64_t>(cfg.strategy.offload.buffer_mb * (1 << 20)));
                    r.host_bytes = moved.host;
                    r.disk_bytes = moved.disk;
                    r.peak_bytes = predict_peak(profile, r, o.gpus);
                    r.fits = r.peak_bytes <= o.gpu_memory;
                    // Relative time per sample: an estimate for ranking, not a measurement.
                    // bf16 runs the matmuls at twice fp32's rate on tensor cores; full
                    // checkpointing adds a forward (~1.35x, docs/benchmarks.md), activation
                    // offload its copies where they do not overlap; the chunked loss recomputes
                    // the output projection; sharding adds communication, optimizer offload a
                    // host step; small micro-batches pay fixed per-step costs.
                    const PrecisionSpec spec = precision_spec(precision);
                    double t = spec.autocast && spec.dtype == at::kBFloat16 ? 0.55 : 1.0;
                    if (checkpointing_kind(ckpt) == CheckpointingKind::full) t *= 1.35;
                    if (offload_act) t *= 1.05;
                    if (chunk > 0) t *= 1.03;
                    if (traits.shards_parameters) {
                      t *= 1.10;  // gathers every unit's parameters in forward and again in backward
                    } else if (traits.shards_optimizer_state) {
                      t *= 1.02;  // gathers the stepped parameters once per step
                    }
                    // Across nodes the links are slower: each model's worth of bytes a
                    // rank sends over them (all of a flat mode's traffic; hsdp's gradient
                    // shards alone) costs 5% more.
                    if (o.nodes > 1 && profile.params > 0) {
                      const double crossing =
                          static_cast<double>(traits.replicated_groups ? r.comm_across_bytes : r.comm_bytes);
                      t *= 1.0 + 0.05 * crossing / (4.0 * static_cast<double>(profile.params));
                    }
                    if (offload) t *= 1.3;
                    // The state read and written each step: slower than RAM offload unless
                    // the disk keeps up with the step (bench/nvme: 1.16x-2.1x RAM offload).
                    if (r.nvme) t *= 1.5;
                    if (optimizer == "adamw8bit" || optimizer == "adafactor") t *= 1.01;
                    // Frozen weights skip their gradients' matmuls (a third of the step);
                    // NF4 dequantizes each weight in forward and again in backward.
                    if (profile.finetune == "lora") t *= 0.75;
                    if (profile.finetune == "qlora") t *= 0.85;
                    t *= 1.0 + 4.0 / static_cast<double>(b);
                    r.time_per_sample = t;
                    rows.push_back(r);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  rank_rows(rows);
  return rows;
}

void rank_rows(std::vector<PlanRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.time_per_sample != b.time_per_sample) return a.time_per_sample < b.time_per_sample;
    return a.peak_bytes < b.peak_bytes;
  });
}

}  // namespace frugal::memory
