// The schema, written once: every YAML key and the struct field it fills, in documented order.
// Binding, unknown-key detection, dumping and the fingerprint all walk this list, so a field
// added to config.h and listed here is parsed, checked, dumped and hashed with no other edit.
// A section is a dotted path ("strategy.grad_scaler"): sub-sections nest to any depth, and a
// section's keys must be listed contiguously (to_yaml opens each map once; a section opened
// twice would dump a duplicate key, which the round-trip test reports).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/config/key_rule.h"
#include "internal.h"

namespace frugal::config_detail {

// Calls visit(section, key, field, rule) for each field; C is Config or const Config. `field` is
// a reference to the struct member, or a small wrapper (Bytes) when the YAML spelling differs;
// `rule` is what the key accepts (frugal/config/key_rule.h), checked by validation. A model
// type's own keys take their ranges from its spec (ModelSpec::keys) on top of these.
template <class C, class Visit>
void for_each_row(C& c, Visit&& visit) {
  using R = KeyRule;
  const KeyRule any;
  visit("run", "name", c.run.name, R::not_empty());
  visit("run", "dir", c.run.dir, R::not_empty());
  visit("run", "seed", c.run.seed, any);
  visit("run", "resume", c.run.resume, R::not_empty("must be never, auto or a checkpoint path"));
  visit("run", "overwrite", c.run.overwrite, any);
  visit("run", "threads", c.run.threads, R::at_least(0));
  visit("run", "device", c.run.device,
        R::matches("auto|cpu|cuda(:[0-9]+)?", "device", "auto, cpu, cuda or cuda:N"));

  visit("model", "type", c.model.type, R::not_empty());
  visit("model", "size", c.model.size, any);
  visit("model", "vocab_size", c.model.vocab_size, any);
  visit("model", "block_size", c.model.block_size, any);
  visit("model", "n_layer", c.model.n_layer, any);
  visit("model", "n_head", c.model.n_head, any);
  visit("model", "n_embd", c.model.n_embd, any);
  visit("model", "dropout", c.model.dropout, R::unit_interval());
  visit("model", "bias", c.model.bias, any);
  visit("model", "kernels", c.model.kernels, any);
  visit("model", "loss_chunk_tokens", c.model.loss_chunk_tokens, R::at_least(0));
  visit("model", "init_from", c.model.init_from, any);
  visit("model", "n_kv_head", c.model.n_kv_head, any);
  visit("model", "intermediate_size", c.model.intermediate_size, any);
  visit("model", "rope_theta", c.model.rope_theta, any);
  visit("model", "rope_scaling", c.model.rope_scaling, any);
  visit("model", "rope_factor", c.model.rope_factor, any);
  visit("model", "rope_low_freq_factor", c.model.rope_low_freq_factor, any);
  visit("model", "rope_high_freq_factor", c.model.rope_high_freq_factor, any);
  visit("model", "rope_original_max_position", c.model.rope_original_max_position, any);
  visit("model", "rms_norm_eps", c.model.rms_norm_eps, any);
  visit("model", "tie_embeddings", c.model.tie_embeddings, any);
  visit("model", "qkv_bias", c.model.qkv_bias, any);
  visit("model", "in_features", c.model.in_features, any);
  visit("model", "hidden", c.model.hidden, any);
  visit("model", "out_features", c.model.out_features, any);
  visit("model", "in_channels", c.model.in_channels, any);
  visit("model", "image_size", c.model.image_size, any);
  visit("model", "channels", c.model.channels, any);
  visit("model", "num_classes", c.model.num_classes, any);
  visit("model", "options", c.model.options, any);
  visit("model.lora", "rank", c.model.lora.rank, any);
  visit("model.lora", "alpha", c.model.lora.alpha, any);
  visit("model.lora", "dropout", c.model.lora.dropout, any);
  visit("model.lora", "targets", c.model.lora.targets, any);
  visit("model.lora", "rslora", c.model.lora.rslora, any);
  visit("model", "freeze", c.model.freeze, any);
  visit("model", "frozen_dtype", c.model.frozen_dtype, R::one_of({"auto", "fp32"}));
  visit("model.quantize_base", "type", c.model.quantize_base.type, R::one_of({"none", "nf4"}));
  visit("model.quantize_base", "modules", c.model.quantize_base.modules, any);
  visit("model", "init_adapter", c.model.init_adapter, any);

  visit("data", "type", c.data.type,
        R::one_of({"tokens", "idx", "synthetic", "text", "chat", "tokenized"}));
  visit("data", "path", c.data.path, any);
  visit("data", "labels_path", c.data.labels_path, any);
  visit("data", "val_path", c.data.val_path, any);
  visit("data", "val_fraction", c.data.val_fraction, R::unit_interval());
  visit("data", "token_format", c.data.token_format, R::one_of({"auto", "nanogpt", "llmc"}));
  visit("data", "micro_batch_size", c.data.micro_batch_size, R::at_least(1));
  visit("data", "seq_len", c.data.seq_len, R::at_least(0));
  visit("data", "num_workers", c.data.num_workers, R::at_least(0));
  visit("data", "pin_memory", c.data.pin_memory, any);
  visit("data", "shuffle", c.data.shuffle, any);
  visit("data", "synthetic_samples", c.data.synthetic_samples, R::at_least(1));
  visit("data", "eot_token", c.data.eot_token, R::at_least(-1));
  visit("data", "allow_tokenizer_mismatch", c.data.allow_tokenizer_mismatch, any);
  visit("data", "chat_format", c.data.chat_format,
        R::one_of({"auto", "llama3", "chatml", "mistral", "plain"}));
  visit("data", "tokenizer", c.data.tokenizer, any);
  visit("data", "train_on", c.data.train_on, R::one_of({"assistant", "all", "last"}));
  visit("data", "packing", c.data.packing, any);
  visit("data", "truncate", c.data.truncate, R::one_of({"right", "left", "error"}));
  visit("data", "max_tokens_per_batch", c.data.max_tokens_per_batch, R::at_least(0));
  visit("data", "no_target", c.data.no_target, R::one_of({"skip", "error"}));

  visit("optim", "type", c.optim.type, R::registered());
  // (the optimizers step in the parameters' dtype: an lr past fp32's range is no number there)
  visit("optim", "lr", c.optim.lr, R::greater_than(0).at_most(1e6));
  visit("optim", "betas", c.optim.betas, R::unit_interval());
  visit("optim", "eps", c.optim.eps, R::greater_than(0));
  visit("optim", "weight_decay", c.optim.weight_decay, R::at_least(0));
  visit("optim", "momentum", c.optim.momentum, R::unit_interval());
  visit("optim", "nesterov", c.optim.nesterov, any);
  visit("optim", "clip_grad_norm", c.optim.clip_grad_norm, R::at_least(0));
  visit("optim", "quant_block", c.optim.quant_block, R::power_of_two(64, 4096));
  visit("optim", "scale_parameter", c.optim.scale_parameter, any);
  visit("optim", "beta1", c.optim.beta1, R::unit_interval());
  visit("optim", "in_backward", c.optim.in_backward, any);

  visit("schedule", "type", c.schedule.type, R::registered());
  visit("schedule", "warmup_steps", c.schedule.warmup_steps, R::at_least(0));
  visit("schedule", "min_lr", c.schedule.min_lr, R::at_least(0));
  visit("schedule", "decay_steps", c.schedule.decay_steps, R::at_least(0));
  visit("schedule", "step_size", c.schedule.step_size, R::at_least(1));
  visit("schedule", "gamma", c.schedule.gamma, R::greater_than(0));

  visit("train", "max_steps", c.train.max_steps, R::at_least(1));
  visit("train", "eval_every", c.train.eval_every, R::at_least(0));
  visit("train", "eval_batches", c.train.eval_batches, R::at_least(0));
  visit("train", "log_every", c.train.log_every, R::at_least(1));
  visit("train", "checkpoint_every", c.train.checkpoint_every, R::at_least(0));
  visit("train", "keep_last", c.train.keep_last, R::at_least(1));
  visit("train", "save_final", c.train.save_final, any);
  visit("train", "checkpoint_async", c.train.checkpoint_async, any);
  visit("train", "progress", c.train.progress, R::one_of({"auto", "bar", "lines", "none"}));
  visit("train", "metrics_per_rank", c.train.metrics_per_rank, any);
  visit("train", "peak_flops", c.train.peak_flops, any);
  visit("train", "phase_timing", c.train.phase_timing, any);
  visit("train", "on_nonfinite", c.train.on_nonfinite, R::one_of({"skip", "halt"}));
  visit("train", "max_nonfinite_steps", c.train.max_nonfinite_steps, R::at_least(1));
  visit("train", "tensorboard", c.train.tensorboard, any);
  visit("train", "tensorboard_ranks", c.train.tensorboard_ranks, R::one_of({"main", "all"}));
  visit("train", "tensorboard_histograms_every", c.train.tensorboard_histograms_every,
        R::at_least(0));
  visit("train.profile", "start_step", c.train.profile.start_step, R::at_least(0));
  visit("train.profile", "steps", c.train.profile.steps, R::at_least(1));
  visit("train.profile", "memory", c.train.profile.memory, any);
  visit("train.profile", "shapes", c.train.profile.shapes, any);

  visit("generate", "tokens", c.generate.tokens, R::at_least(0));
  visit("generate", "temperature", c.generate.temperature, R::greater_than(0));
  visit("generate", "top_k", c.generate.top_k, R::at_least(0));
  visit("generate", "prompt", c.generate.prompt, any);
  visit("generate", "tokenizer", c.generate.tokenizer, any);

  visit("strategy", "precision", c.strategy.precision, R::registered());
  visit("strategy.grad_scaler", "enabled", c.strategy.grad_scaler.enabled, any);
  visit("strategy.grad_scaler", "init_scale", c.strategy.grad_scaler.init_scale,
        R::greater_than(0));
  visit("strategy.grad_scaler", "growth_factor", c.strategy.grad_scaler.growth_factor,
        R::greater_than(1));
  visit("strategy.grad_scaler", "backoff_factor", c.strategy.grad_scaler.backoff_factor,
        R::open_unit_interval());
  visit("strategy.grad_scaler", "growth_interval", c.strategy.grad_scaler.growth_interval,
        R::at_least(1));
  visit("strategy", "accumulation", c.strategy.accumulation, R::at_least(1));
  visit("strategy.checkpointing", "policy", c.strategy.checkpointing.policy, R::registered());
  visit("strategy.checkpointing", "k", c.strategy.checkpointing.k, R::at_least(1));
  visit("strategy.checkpointing", "targets", c.strategy.checkpointing.targets,
        R::one_of({"attn", "mlp"}));
  visit("strategy.checkpointing", "memory_budget", c.strategy.checkpointing.memory_budget, any);
  visit("strategy.sharding", "mode", c.strategy.sharding.mode, R::registered());
  visit("strategy.sharding", "bucket_mb", c.strategy.sharding.bucket_mb, R::greater_than(0));
  visit("strategy.sharding", "wrap", c.strategy.sharding.wrap, R::one_of({"block", "size"}));
  visit("strategy.sharding", "unit_mb", c.strategy.sharding.unit_mb, R::greater_than(0));
  visit("strategy.sharding", "param_dtype", c.strategy.sharding.param_dtype,
        R::one_of({"auto", "fp32", "bf16", "fp16"}));
  visit("strategy.sharding", "reduce_dtype", c.strategy.sharding.reduce_dtype,
        R::one_of({"auto", "fp32", "bf16", "fp16"}));
  visit("strategy.sharding", "prefetch", c.strategy.sharding.prefetch, R::at_least(0));
  visit("strategy.sharding", "accumulate_sharded", c.strategy.sharding.accumulate_sharded, any);
  visit("strategy.sharding", "shard_size", c.strategy.sharding.shard_size, R::at_least(0));
  visit("strategy.offload", "optimizer", c.strategy.offload.optimizer, any);
  visit("strategy.offload", "nvme_path", c.strategy.offload.nvme_path, any);
  visit("strategy.offload", "buffer_mb", c.strategy.offload.buffer_mb, R::greater_than(0));
  visit("strategy.offload", "nvme_require_direct", c.strategy.offload.nvme_require_direct, any);
  visit("strategy.offload", "params", c.strategy.offload.params, any);
  visit("strategy.offload", "pin_memory", c.strategy.offload.pin_memory, any);
  visit("strategy.offload", "activations", c.strategy.offload.activations, any);
  visit("strategy.offload", "activation_prefetch", c.strategy.offload.activation_prefetch,
        R::at_least(0));

  visit("memory", "monitor_every", c.memory.monitor_every, R::at_least(0));
  visit("memory", "empty_cache_every", c.memory.empty_cache_every, R::at_least(0));
  visit("memory", "budget", byte_count(c.memory.budget), R::at_least(0));
  visit("memory", "record_history", c.memory.record_history, any);
  visit("memory", "history_max_events", c.memory.history_max_events, R::at_least(1));
  visit("memory", "host_allocator", c.memory.host_allocator, R::one_of({"tuned", "system"}));

  visit("distributed", "backend", c.distributed.backend, R::one_of({"auto", "nccl", "gloo"}));
  visit("distributed", "timeout_s", c.distributed.timeout_s, R::greater_than(0));
  visit("distributed", "debug", c.distributed.debug, any);
}

// for_each_row without the rules: visit(section, key, field).
template <class C, class Visit>
void for_each_field(C& c, Visit&& visit) {
  for_each_row(c, [&](const char* section, const char* key, auto&& field, const KeyRule&) {
    visit(section, key, field);
  });
}

// A section written as one scalar is short for {key: scalar}: `checkpointing: full` is
// `checkpointing: {policy: full}`. Section path -> key.
inline const std::map<std::string, std::string, std::less<>>& schema_shorthands() {
  static const std::map<std::string, std::string, std::less<>> shorthands = {
      {"strategy.checkpointing", "policy"},
      {"strategy.sharding", "mode"},
      {"model.quantize_base", "type"},
  };
  return shorthands;
}

// The dotted path of `key` in `section`: ("strategy.grad_scaler", "k") -> "strategy.grad_scaler.k";
// the root's section is "" (("", "optim") -> "optim").
inline std::string dotted(std::string_view section, std::string_view key) {
  if (section.empty()) return std::string(key);
  return std::string(section) + "." + std::string(key);
}

// Every map of the schema by dotted path ("" is the root, holding the top-level sections), each
// with the names it may hold (keys and sub-sections) in schema order.
using SchemaMaps = std::map<std::string, std::vector<std::string>, std::less<>>;

inline const SchemaMaps& schema_maps() {
  static const SchemaMaps maps = [] {
    SchemaMaps out;
    auto add = [&](const std::string& parent, const std::string& name) {
      std::vector<std::string>& names = out[parent];
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    };
    const Config defaults;
    for_each_field(defaults, [&](const char* section, const char* key, const auto&) {
      // Register each level of the section path under its parent, then the key itself.
      const std::string path = section;
      std::string parent;
      for (size_t start = 0;;) {
        const size_t dot = path.find('.', start);
        const std::string name = path.substr(start, dot - start);
        add(parent, name);
        parent = dotted(parent, name);
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
      add(path, key);
    });
    return out;
  }();
  return maps;
}

// The names a schema map may hold, or null when `path` is not a map of the schema (a key).
inline const std::vector<std::string>* schema_children(std::string_view path) {
  const auto it = schema_maps().find(path);
  return it == schema_maps().end() ? nullptr : &it->second;
}

}  // namespace frugal::config_detail
