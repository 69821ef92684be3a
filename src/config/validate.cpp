// Checks on a typed Config: each key against its rule (the schema's rows, schema.h, and the
// model type's keys), then the relations between keys. Each failure names the dotted key, and
// through the marks kept by load_config, the file:line:column where that key was written.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frugal/config/config_check.h"
#include "frugal/config/load.h"
#include "frugal/config/strategy_names.h"
#include "frugal/models/model_spec.h"
#include "frugal/strategy/precision.h"
#include "frugal/strategy/sharding_traits.h"
#include "frugal/util/error.h"
#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

// A ConfigCheck located through the marks kept by load_config.
class Checker : public ConfigCheck {
 public:
  Checker(const Config& config, const KeyMarks* marks) : config_(config), marks_(marks) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message,
                         const std::string& near = "") const override {
    Loc loc{config_.source};
    if (marks_) {
      for (const std::string& k : {key, near}) {
        if (auto it = marks_->find(k); it != marks_->end()) {
          loc = it->second;
          break;
        }
      }
    }
    config_detail::fail(loc, key + ": " + message);
  }

  bool written(const std::string& prefix) const override {
    if (!marks_) return false;
    for (const auto& [k, loc] : *marks_) {
      if (k == prefix || k.rfind(prefix + ".", 0) == 0) return true;
    }
    return false;
  }

 private:
  const Config& config_;
  const KeyMarks* marks_;
};

// Each key against its rule: the schema's (schema.h), and for model.* keys the chosen type's
// (ModelSpec::keys). Run before the relations, which may divide by what a rule keeps above 0.
template <class T>
void check_value(const KeyRule& rule, const Checker& c, const std::string& key, const T& value) {
  rule.check(c, key, value);
}
template <class T>
void check_value(const KeyRule& rule, const Checker& c, const std::string& key,
                 const Bytes<T>& value) {
  rule.check(c, key, static_cast<int64_t>(value.value));
}
// (checked as it is read: scalars.cpp)
void check_value(const KeyRule&, const Checker&, const std::string&, const MemoryAmount&) {}
void check_value(const KeyRule&, const Checker&, const std::string&, const OptimizerPlace&) {}

void check_rules(const Checker& c, const Config& config) {
  const std::optional<ModelSpec> spec = find_model_spec(config.model.type);
  for_each_row(config, [&](const char* section, const char* key, const auto& field,
                           const KeyRule& rule) {
    const std::string path = dotted(section, key);
    check_value(rule, c, path, field);
    if (spec && std::string_view(section) == "model") {
      if (const KeyRule* own = spec->key_rule(key)) check_value(*own, c, path, field);
    }
  });
}

void check_model(const Checker& c, const ModelConfig& m, const DataConfig& data) {
  if (!m.size.empty()) {
    // A preset size names its type: a type that has presets of its own takes only those (a
    // type registered without presets may use any).
    const std::optional<FoundPreset> found = find_model_preset(m.size);
    const std::optional<ModelSpec> spec = find_model_spec(m.type);
    if (!found) {
      c.one_of(m.size, model_preset_names(), "model.size");
    } else if (spec && !spec->presets.empty()) {
      c.require(m.type == found->type, "model.size",
                fmt::format("'{}' is a {} size, model.type is {} (set model.type: {})", m.size,
                            found->type, m.type, found->type),
                "model.type");
    }
  }
  // Fine-tuning (frugal/models/lora.h).
  // rank 0 is LoRA off; a model.lora section that leaves it at 0 asks for adapters of no rank.
  c.require(m.lora.rank > 0 || (m.lora.rank == 0 && !c.written("model.lora")), "model.lora.rank",
            fmt::format("must be > 0, got {}", m.lora.rank), "model.lora");
  if (m.lora.rank > 0) {
    c.positive(m.lora.alpha, "model.lora.alpha");
    c.unit_interval(m.lora.dropout, "model.lora.dropout");
  }
  c.require(m.quantize_base.type == "none" || m.lora.rank > 0 || !m.quantize_base.modules.empty(),
            "model.quantize_base",
            "nf4 quantizes the LoRA targets: set model.lora.rank (QLoRA) or "
            "model.quantize_base.modules");
  c.require(m.init_adapter.empty() || m.lora.rank > 0, "model.init_adapter",
            "an adapter folder needs model.lora (its rank, alpha and targets must match the "
            "folder's adapter_config.json)");
  // The type's own checks: only the sizes of the chosen type matter, the others keep their
  // defaults unused.
  const std::optional<ModelSpec> spec = find_model_spec(m.type);
  if (spec && spec->check) spec->check(m, data, c);
}

void check_data(const Checker& c, const DataConfig& d, const ModelConfig& m) {
  const std::optional<ModelSpec> spec = find_model_spec(m.type);
  const bool no_position_ids = spec && !spec->position_ids;
  if (d.packing && (d.type == "chat" || d.type == "tokenized")) {
    // Packed samples are told apart by their position ids (GPT's are learned absolute).
    c.require(!no_position_ids, "data.packing",
              fmt::format("needs a model that takes position ids (model.type {} does not)", m.type),
              "model.type");
  }
  if (d.type != "synthetic")
    c.require(!d.path.empty(), "data.path",
              fmt::format("is required when data.type is '{}'", d.type), "data.type");
  if (d.eot_token >= 0) {
    // Document masking needs a model that takes position ids (GPT's are learned absolute);
    // a registered model may (Model::forward_batch).
    c.require(!no_position_ids, "data.eot_token",
              fmt::format("needs a model that takes position ids (model.type {} does not)", m.type),
              "model.type");
    const bool vocabulary = spec && spec->inputs == ModelSpec::Inputs::tokens;
    c.require(!vocabulary || d.eot_token < m.vocab_size, "data.eot_token",
              fmt::format("must be < model.vocab_size ({}), got {}", m.vocab_size, d.eot_token),
              "model.vocab_size");
  }
}

void check_optim(const Checker& c, const OptimConfig& o) {
  c.require(o.beta1 == 0.0 || o.type == "adafactor", "optim.beta1",
            fmt::format("is adafactor's first moment (got it with optim.type {}; adam's and "
                        "adamw's are optim.betas)",
                        o.type),
            "optim.type");
  // torch refuses Nesterov without momentum; say so before the run starts.
  c.require(!o.nesterov || o.momentum > 0, "optim.nesterov", "needs optim.momentum > 0",
            "optim.momentum");
  c.require(!o.in_backward || o.clip_grad_norm == 0, "optim.in_backward",
            "cannot clip: clipping needs every gradient before the first update (set "
            "optim.clip_grad_norm: 0)",
            "optim.clip_grad_norm");
}

void check_schedule(const Checker& c, const ScheduleConfig& s, const OptimConfig& o) {
  c.require(s.min_lr <= o.lr, "schedule.min_lr",
            fmt::format("must be <= optim.lr ({}), got {}", o.lr, s.min_lr), "optim.lr");
}

void check_checkpointing(const Checker& c, const CheckpointingConfig& p) {
  const std::string key = "strategy.checkpointing";
  c.require(p.memory_budget.empty() || p.policy == "auto", key + ".memory_budget",
            "applies to policy auto only (the budget it chooses a policy for)", key + ".policy");
  if (p.policy == "selective")
    c.require(!p.targets.empty(), key + ".targets", "must name at least one of attn, mlp",
              key + ".policy");
}

void check_in_backward(const Checker& c, const OptimConfig& o, const StrategyConfig& s) {
  if (!o.in_backward) return;
  const auto precision = find_precision_spec(s.precision);
  c.require(!precision || !precision->loss_scaling, "optim.in_backward",
            "cannot run with " + s.precision +
                ": the loss scaler must see every gradient before "
                "the first update (use bf16-mixed)",
            "strategy.precision");
  c.require(!s.offload.optimizer, "optim.in_backward",
            "is what offload.optimizer already does on the host (during backward): use one",
            "strategy.offload.optimizer");
}

// Adafactor factors each matrix's second moment into rows and columns; ZeRO's flat 1-D shards
// have neither, so the optimizer would keep a full second moment per element.
void check_optimizer_sharding(const Checker& c, const OptimConfig& o, const StrategyConfig& s) {
  const std::string& mode = s.sharding.mode;
  const auto traits = find_sharding_traits(mode);
  c.require(o.type != "adafactor" || !traits || !traits->shards_optimizer_state, "optim.type",
            "adafactor cannot run with strategy.sharding.mode " + mode +
                ": its flat shards have no rows and columns to factor (use adamw8bit, or "
                "sharding none or ddp)",
            "strategy.sharding.mode");
}

void check_strategy(const Checker& c, const StrategyConfig& s) {
  check_checkpointing(c, s.checkpointing);
  if (s.offload.params) {
    const auto traits = find_sharding_traits(s.sharding.mode);
    c.require(!traits || traits->shards_parameters, "strategy.offload.params",
              "needs strategy.sharding.mode zero3 (only zero3 shards the parameters), got '" +
                  s.sharding.mode + "'");
  }
  if (s.offload.optimizer.where == OptimizerPlace::nvme) {
    c.require(!s.offload.nvme_path.empty(), "strategy.offload.nvme_path",
              "is needed with offload.optimizer nvme: a directory on a fast local disk for the "
              "optimizer state files",
              "strategy.offload.optimizer");
  }
}

}  // namespace

void validate(const Config& config, const KeyMarks* marks) {
  const Checker c(config, marks);
  check_rules(c, config);
  check_model(c, config.model, config.data);
  check_data(c, config.data, config.model);
  check_optim(c, config.optim);
  check_schedule(c, config.schedule, config.optim);
  check_strategy(c, config.strategy);
  check_in_backward(c, config.optim, config.strategy);
  check_optimizer_sharding(c, config.optim, config.strategy);
}

}  // namespace frugal::config_detail

namespace frugal {

void validate(const Config& config) { config_detail::validate(config, nullptr); }

}  // namespace frugal
