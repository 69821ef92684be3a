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
#include "internal.h"

namespace frugal::config_detail {

// Calls visit(section, key, field) for each field; C is Config or const Config. `field` is a
// reference to the struct member, or a small wrapper (Bytes) when the YAML spelling differs.
template <class C, class Visit>
void for_each_field(C& c, Visit&& visit) {
  visit("run", "name", c.run.name);
  visit("run", "dir", c.run.dir);
  visit("run", "seed", c.run.seed);
  visit("run", "resume", c.run.resume);
  visit("run", "overwrite", c.run.overwrite);
  visit("run", "threads", c.run.threads);
  visit("run", "device", c.run.device);

  visit("model", "type", c.model.type);
  visit("model", "size", c.model.size);
  visit("model", "vocab_size", c.model.vocab_size);
  visit("model", "block_size", c.model.block_size);
  visit("model", "n_layer", c.model.n_layer);
  visit("model", "n_head", c.model.n_head);
  visit("model", "n_embd", c.model.n_embd);
  visit("model", "dropout", c.model.dropout);
  visit("model", "bias", c.model.bias);
  visit("model", "kernels", c.model.kernels);
  visit("model", "loss_chunk_tokens", c.model.loss_chunk_tokens);
  visit("model", "init_from", c.model.init_from);
  visit("model", "n_kv_head", c.model.n_kv_head);
  visit("model", "intermediate_size", c.model.intermediate_size);
  visit("model", "rope_theta", c.model.rope_theta);
  visit("model", "rope_scaling", c.model.rope_scaling);
  visit("model", "rope_factor", c.model.rope_factor);
  visit("model", "rope_low_freq_factor", c.model.rope_low_freq_factor);
  visit("model", "rope_high_freq_factor", c.model.rope_high_freq_factor);
  visit("model", "rope_original_max_position", c.model.rope_original_max_position);
  visit("model", "rms_norm_eps", c.model.rms_norm_eps);
  visit("model", "tie_embeddings", c.model.tie_embeddings);
  visit("model", "qkv_bias", c.model.qkv_bias);
  visit("model", "in_features", c.model.in_features);
  visit("model", "hidden", c.model.hidden);
  visit("model", "out_features", c.model.out_features);
  visit("model", "in_channels", c.model.in_channels);
  visit("model", "image_size", c.model.image_size);
  visit("model", "channels", c.model.channels);
  visit("model", "num_classes", c.model.num_classes);
  visit("model", "options", c.model.options);
  visit("model.lora", "rank", c.model.lora.rank);
  visit("model.lora", "alpha", c.model.lora.alpha);
  visit("model.lora", "dropout", c.model.lora.dropout);
  visit("model.lora", "targets", c.model.lora.targets);
  visit("model.lora", "rslora", c.model.lora.rslora);
  visit("model", "freeze", c.model.freeze);
  visit("model", "frozen_dtype", c.model.frozen_dtype);
  visit("model.quantize_base", "type", c.model.quantize_base.type);
  visit("model.quantize_base", "modules", c.model.quantize_base.modules);
  visit("model", "init_adapter", c.model.init_adapter);

  visit("data", "type", c.data.type);
  visit("data", "path", c.data.path);
  visit("data", "labels_path", c.data.labels_path);
  visit("data", "val_path", c.data.val_path);
  visit("data", "val_fraction", c.data.val_fraction);
  visit("data", "token_format", c.data.token_format);
  visit("data", "micro_batch_size", c.data.micro_batch_size);
  visit("data", "seq_len", c.data.seq_len);
  visit("data", "num_workers", c.data.num_workers);
  visit("data", "pin_memory", c.data.pin_memory);
  visit("data", "shuffle", c.data.shuffle);
  visit("data", "synthetic_samples", c.data.synthetic_samples);
  visit("data", "eot_token", c.data.eot_token);
  visit("data", "allow_tokenizer_mismatch", c.data.allow_tokenizer_mismatch);
  visit("data", "chat_format", c.data.chat_format);
  visit("data", "tokenizer", c.data.tokenizer);
  visit("data", "train_on", c.data.train_on);
  visit("data", "packing", c.data.packing);
  visit("data", "truncate", c.data.truncate);
  visit("data", "max_tokens_per_batch", c.data.max_tokens_per_batch);
  visit("data", "no_target", c.data.no_target);

  visit("optim", "type", c.optim.type);
  visit("optim", "lr", c.optim.lr);
  visit("optim", "betas", c.optim.betas);
  visit("optim", "eps", c.optim.eps);
  visit("optim", "weight_decay", c.optim.weight_decay);
  visit("optim", "momentum", c.optim.momentum);
  visit("optim", "nesterov", c.optim.nesterov);
  visit("optim", "clip_grad_norm", c.optim.clip_grad_norm);
  visit("optim", "quant_block", c.optim.quant_block);
  visit("optim", "scale_parameter", c.optim.scale_parameter);
  visit("optim", "beta1", c.optim.beta1);
  visit("optim", "in_backward", c.optim.in_backward);

  visit("schedule", "type", c.schedule.type);
  visit("schedule", "warmup_steps", c.schedule.warmup_steps);
  visit("schedule", "min_lr", c.schedule.min_lr);
  visit("schedule", "decay_steps", c.schedule.decay_steps);
  visit("schedule", "step_size", c.schedule.step_size);
  visit("schedule", "gamma", c.schedule.gamma);

  visit("train", "max_steps", c.train.max_steps);
  visit("train", "eval_every", c.train.eval_every);
  visit("train", "eval_batches", c.train.eval_batches);
  visit("train", "log_every", c.train.log_every);
  visit("train", "checkpoint_every", c.train.checkpoint_every);
  visit("train", "keep_last", c.train.keep_last);
  visit("train", "save_final", c.train.save_final);
  visit("train", "progress", c.train.progress);
  visit("train", "metrics_per_rank", c.train.metrics_per_rank);
  visit("train", "peak_flops", c.train.peak_flops);
  visit("train", "phase_timing", c.train.phase_timing);
  visit("train", "on_nonfinite", c.train.on_nonfinite);
  visit("train", "max_nonfinite_steps", c.train.max_nonfinite_steps);
  visit("train", "tensorboard", c.train.tensorboard);
  visit("train", "tensorboard_ranks", c.train.tensorboard_ranks);
  visit("train", "tensorboard_histograms_every", c.train.tensorboard_histograms_every);
  visit("train.profile", "start_step", c.train.profile.start_step);
  visit("train.profile", "steps", c.train.profile.steps);
  visit("train.profile", "memory", c.train.profile.memory);
  visit("train.profile", "shapes", c.train.profile.shapes);

  visit("generate", "tokens", c.generate.tokens);
  visit("generate", "temperature", c.generate.temperature);
  visit("generate", "top_k", c.generate.top_k);
  visit("generate", "prompt", c.generate.prompt);
  visit("generate", "tokenizer", c.generate.tokenizer);

  visit("strategy", "precision", c.strategy.precision);
  visit("strategy.grad_scaler", "enabled", c.strategy.grad_scaler.enabled);
  visit("strategy.grad_scaler", "init_scale", c.strategy.grad_scaler.init_scale);
  visit("strategy.grad_scaler", "growth_factor", c.strategy.grad_scaler.growth_factor);
  visit("strategy.grad_scaler", "backoff_factor", c.strategy.grad_scaler.backoff_factor);
  visit("strategy.grad_scaler", "growth_interval", c.strategy.grad_scaler.growth_interval);
  visit("strategy", "accumulation", c.strategy.accumulation);
  visit("strategy.checkpointing", "policy", c.strategy.checkpointing.policy);
  visit("strategy.checkpointing", "k", c.strategy.checkpointing.k);
  visit("strategy.checkpointing", "targets", c.strategy.checkpointing.targets);
  visit("strategy.checkpointing", "memory_budget", c.strategy.checkpointing.memory_budget);
  visit("strategy.sharding", "mode", c.strategy.sharding.mode);
  visit("strategy.sharding", "bucket_mb", c.strategy.sharding.bucket_mb);
  visit("strategy.sharding", "wrap", c.strategy.sharding.wrap);
  visit("strategy.sharding", "unit_mb", c.strategy.sharding.unit_mb);
  visit("strategy.sharding", "param_dtype", c.strategy.sharding.param_dtype);
  visit("strategy.sharding", "reduce_dtype", c.strategy.sharding.reduce_dtype);
  visit("strategy.sharding", "prefetch", c.strategy.sharding.prefetch);
  visit("strategy.sharding", "accumulate_sharded", c.strategy.sharding.accumulate_sharded);
  visit("strategy.offload", "optimizer", c.strategy.offload.optimizer);
  visit("strategy.offload", "params", c.strategy.offload.params);
  visit("strategy.offload", "pin_memory", c.strategy.offload.pin_memory);
  visit("strategy.offload", "activations", c.strategy.offload.activations);
  visit("strategy.offload", "activation_prefetch", c.strategy.offload.activation_prefetch);

  visit("memory", "monitor_every", c.memory.monitor_every);
  visit("memory", "empty_cache_every", c.memory.empty_cache_every);
  visit("memory", "budget", byte_count(c.memory.budget));
  visit("memory", "record_history", c.memory.record_history);
  visit("memory", "history_max_events", c.memory.history_max_events);
  visit("memory", "host_allocator", c.memory.host_allocator);

  visit("distributed", "backend", c.distributed.backend);
  visit("distributed", "timeout_s", c.distributed.timeout_s);
  visit("distributed", "debug", c.distributed.debug);
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
