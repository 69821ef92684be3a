// The schema, written once: every YAML key and the struct field it fills, in documented order.
// Binding, unknown-key detection, dumping and the fingerprint all walk this list, so a field
// added to config.h and listed here is parsed, checked, dumped and hashed with no other edit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::config_detail {

// Calls visit(section, key, field) for each field; C is Config or const Config.
template <class C, class Visit>
void for_each_field(C& c, Visit&& visit) {
  visit("run", "name", c.run.name);
  visit("run", "dir", c.run.dir);
  visit("run", "seed", c.run.seed);
  visit("run", "resume", c.run.resume);
  visit("run", "overwrite", c.run.overwrite);
  visit("run", "threads", c.run.threads);

  visit("model", "type", c.model.type);
  visit("model", "size", c.model.size);
  visit("model", "vocab_size", c.model.vocab_size);
  visit("model", "block_size", c.model.block_size);
  visit("model", "n_layer", c.model.n_layer);
  visit("model", "n_head", c.model.n_head);
  visit("model", "n_embd", c.model.n_embd);
  visit("model", "dropout", c.model.dropout);
  visit("model", "bias", c.model.bias);
  visit("model", "in_features", c.model.in_features);
  visit("model", "hidden", c.model.hidden);
  visit("model", "out_features", c.model.out_features);
  visit("model", "in_channels", c.model.in_channels);
  visit("model", "image_size", c.model.image_size);
  visit("model", "channels", c.model.channels);
  visit("model", "num_classes", c.model.num_classes);
  visit("model", "options", c.model.options);

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

  visit("optim", "type", c.optim.type);
  visit("optim", "lr", c.optim.lr);
  visit("optim", "betas", c.optim.betas);
  visit("optim", "eps", c.optim.eps);
  visit("optim", "weight_decay", c.optim.weight_decay);
  visit("optim", "momentum", c.optim.momentum);
  visit("optim", "nesterov", c.optim.nesterov);
  visit("optim", "clip_grad_norm", c.optim.clip_grad_norm);

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
  visit("train", "progress", c.train.progress);

  visit("generate", "tokens", c.generate.tokens);
  visit("generate", "temperature", c.generate.temperature);
  visit("generate", "top_k", c.generate.top_k);
  visit("generate", "prompt", c.generate.prompt);

  visit("strategy", "precision", c.strategy.precision);
  visit("strategy", "accumulation", c.strategy.accumulation);

  visit("distributed", "backend", c.distributed.backend);
  visit("distributed", "timeout_s", c.distributed.timeout_s);
}

// Sections in order, each with its keys in order.
using SchemaKeys = std::vector<std::pair<std::string, std::vector<std::string>>>;

inline const SchemaKeys& schema_keys() {
  static const SchemaKeys keys = [] {
    SchemaKeys out;
    const Config defaults;
    for_each_field(defaults, [&](const char* section, const char* key, const auto&) {
      if (out.empty() || out.back().first != section) out.push_back({section, {}});
      out.back().second.push_back(key);
    });
    return out;
  }();
  return keys;
}

}  // namespace frugal::config_detail
