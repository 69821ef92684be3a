// Range and cross-field checks on a typed Config. Each failure names the dotted key, and
// through the marks kept by load_config, the file:line:column where that key was written.
// model.type is free (models may be registered by users); other names are closed sets.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "frugal/config/config_check.h"
#include "frugal/config/load.h"
#include "frugal/config/strategy_names.h"
#include "frugal/models/model_spec.h"
#include "frugal/strategy/precision.h"
#include "frugal/strategy/sharding_traits.h"
#include "frugal/util/error.h"
#include "internal.h"

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

void check_run(const Checker& c, const RunConfig& run) {
  c.require(!run.name.empty(), "run.name", "must not be empty");
  c.require(!run.dir.empty(), "run.dir", "must not be empty");
  c.require(!run.resume.empty(), "run.resume", "must be never, auto or a checkpoint path");
  c.at_least<int64_t>(run.threads, 0, "run.threads");
  c.require(std::regex_match(run.device, std::regex("auto|cpu|cuda(:[0-9]+)?")), "run.device",
            fmt::format("unknown device '{}' (expected auto, cpu, cuda or cuda:N)", run.device));
}

void check_model(const Checker& c, const ModelConfig& m, const DataConfig& data) {
  c.require(!m.type.empty(), "model.type", "must not be empty");
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
  c.at_least<int64_t>(m.loss_chunk_tokens, 0, "model.loss_chunk_tokens");
  c.unit_interval(m.dropout, "model.dropout");
  // Fine-tuning (frugal/models/lora.h).
  // rank 0 is LoRA off; a model.lora section that leaves it at 0 asks for adapters of no rank.
  c.require(m.lora.rank > 0 || (m.lora.rank == 0 && !c.written("model.lora")), "model.lora.rank",
            fmt::format("must be > 0, got {}", m.lora.rank), "model.lora");
  if (m.lora.rank > 0) {
    c.positive(m.lora.alpha, "model.lora.alpha");
    c.unit_interval(m.lora.dropout, "model.lora.dropout");
  }
  c.one_of(m.quantize_base.type, {"none", "nf4"}, "model.quantize_base.type");
  c.one_of(m.frozen_dtype, {"auto", "fp32"}, "model.frozen_dtype");
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
  c.one_of(d.type, {"tokens", "idx", "synthetic", "text", "chat", "tokenized"}, "data.type");
  c.one_of(d.chat_format, {"auto", "llama3", "chatml", "mistral", "plain"}, "data.chat_format");
  c.one_of(d.train_on, {"assistant", "all", "last"}, "data.train_on");
  c.one_of(d.truncate, {"right", "left", "error"}, "data.truncate");
  c.one_of(d.no_target, {"skip", "error"}, "data.no_target");
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
  c.unit_interval(d.val_fraction, "data.val_fraction");
  c.one_of(d.token_format, {"auto", "nanogpt", "llmc"}, "data.token_format");
  c.at_least<int64_t>(d.micro_batch_size, 1, "data.micro_batch_size");
  c.at_least<int64_t>(d.max_tokens_per_batch, 0, "data.max_tokens_per_batch");
  c.at_least<int64_t>(d.seq_len, 0, "data.seq_len");
  c.at_least<int64_t>(d.num_workers, 0, "data.num_workers");
  c.at_least<int64_t>(d.synthetic_samples, 1, "data.synthetic_samples");
  c.at_least<int64_t>(d.eot_token, -1, "data.eot_token");
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
  c.one_of(o.type, strategy_names("optim.type"), "optim.type");
  c.positive(o.lr, "optim.lr");
  // The optimizers step in the parameters' dtype: an lr past fp32's range is no number there.
  c.require(o.lr <= 1e6, "optim.lr", fmt::format("must be <= 1e6, got {:g}", o.lr));
  c.unit_interval(o.betas[0], "optim.betas");
  c.unit_interval(o.betas[1], "optim.betas");
  c.positive(o.eps, "optim.eps");
  c.non_negative(o.weight_decay, "optim.weight_decay");
  c.unit_interval(o.momentum, "optim.momentum");
  c.unit_interval(o.beta1, "optim.beta1");
  c.require(o.beta1 == 0.0 || o.type == "adafactor", "optim.beta1",
            fmt::format("is adafactor's first moment (got it with optim.type {}; adam's and "
                        "adamw's are optim.betas)",
                        o.type),
            "optim.type");
  // torch refuses Nesterov without momentum; say so before the run starts.
  c.require(!o.nesterov || o.momentum > 0, "optim.nesterov", "needs optim.momentum > 0",
            "optim.momentum");
  c.non_negative(o.clip_grad_norm, "optim.clip_grad_norm");
  const int64_t b = o.quant_block;
  c.require(b >= 64 && b <= 4096 && (b & (b - 1)) == 0, "optim.quant_block",
            fmt::format("must be a power of two in [64, 4096], got {}", b));
  c.require(!o.in_backward || o.clip_grad_norm == 0, "optim.in_backward",
            "cannot clip: clipping needs every gradient before the first update (set "
            "optim.clip_grad_norm: 0)",
            "optim.clip_grad_norm");
}

void check_schedule(const Checker& c, const ScheduleConfig& s, const OptimConfig& o) {
  c.one_of(s.type, strategy_names("schedule.type"), "schedule.type");
  c.at_least<int64_t>(s.warmup_steps, 0, "schedule.warmup_steps");
  c.non_negative(s.min_lr, "schedule.min_lr");
  c.require(s.min_lr <= o.lr, "schedule.min_lr",
            fmt::format("must be <= optim.lr ({}), got {}", o.lr, s.min_lr), "optim.lr");
  c.at_least<int64_t>(s.decay_steps, 0, "schedule.decay_steps");
  c.at_least<int64_t>(s.step_size, 1, "schedule.step_size");
  c.positive(s.gamma, "schedule.gamma");
}

void check_train(const Checker& c, const TrainConfig& t) {
  c.at_least<int64_t>(t.max_steps, 1, "train.max_steps");
  c.at_least<int64_t>(t.eval_every, 0, "train.eval_every");
  c.at_least<int64_t>(t.eval_batches, 0, "train.eval_batches");  // 0 = no evaluation
  c.at_least<int64_t>(t.log_every, 1, "train.log_every");
  c.at_least<int64_t>(t.checkpoint_every, 0, "train.checkpoint_every");
  c.at_least<int64_t>(t.keep_last, 1, "train.keep_last");
  c.one_of(t.progress, {"auto", "bar", "lines", "none"}, "train.progress");
  c.one_of(t.on_nonfinite, {"skip", "halt"}, "train.on_nonfinite");
  c.at_least<int64_t>(t.max_nonfinite_steps, 1, "train.max_nonfinite_steps");
  c.at_least<int64_t>(t.profile.start_step, 0, "train.profile.start_step");
  c.at_least<int64_t>(t.profile.steps, 1, "train.profile.steps");
  c.one_of(t.tensorboard_ranks, {"main", "all"}, "train.tensorboard_ranks");
  c.at_least<int64_t>(t.tensorboard_histograms_every, 0, "train.tensorboard_histograms_every");
}

void check_generate(const Checker& c, const GenerateConfig& g) {
  c.at_least<int64_t>(g.tokens, 0, "generate.tokens");
  c.positive(g.temperature, "generate.temperature");
  c.at_least<int64_t>(g.top_k, 0, "generate.top_k");
}

void check_grad_scaler(const Checker& c, const GradScalerConfig& g) {
  // Checked even when unused (precision other than fp16-mixed), so a file is valid or not
  // whatever precision a --set picks.
  c.positive(g.init_scale, "strategy.grad_scaler.init_scale");
  c.require(g.growth_factor > 1 && std::isfinite(g.growth_factor),
            "strategy.grad_scaler.growth_factor",
            fmt::format("must be > 1, got {}", g.growth_factor));
  c.require(g.backoff_factor > 0 && g.backoff_factor < 1, "strategy.grad_scaler.backoff_factor",
            fmt::format("must be in (0, 1), got {}", g.backoff_factor));
  c.at_least<int64_t>(g.growth_interval, 1, "strategy.grad_scaler.growth_interval");
}

void check_checkpointing(const Checker& c, const CheckpointingConfig& p) {
  const std::string key = "strategy.checkpointing";
  c.one_of(p.policy, strategy_names(key + ".policy"), key + ".policy");
  c.at_least<int64_t>(p.k, 1, key + ".k");
  c.require(p.memory_budget.empty() || p.policy == "auto", key + ".memory_budget",
            "applies to policy auto only (the budget it chooses a policy for)", key + ".policy");
  if (p.policy == "selective")
    c.require(!p.targets.empty(), key + ".targets", "must name at least one of attn, mlp",
              key + ".policy");
  for (size_t i = 0; i < p.targets.size(); ++i)
    c.one_of(p.targets[i], {"attn", "mlp"}, fmt::format("{}.targets[{}]", key, i),
             key + ".targets");
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
  c.one_of(s.precision, strategy_names("strategy.precision"), "strategy.precision");
  check_grad_scaler(c, s.grad_scaler);
  c.at_least<int64_t>(s.accumulation, 1, "strategy.accumulation");
  check_checkpointing(c, s.checkpointing);
  c.one_of(s.sharding.mode, strategy_names("strategy.sharding.mode"), "strategy.sharding.mode");
  c.positive(s.sharding.bucket_mb, "strategy.sharding.bucket_mb");
  c.one_of(s.sharding.wrap, {"block", "size"}, "strategy.sharding.wrap");
  c.positive(s.sharding.unit_mb, "strategy.sharding.unit_mb");
  c.one_of(s.sharding.param_dtype, {"auto", "fp32", "bf16", "fp16"}, "strategy.sharding.param_dtype");
  c.one_of(s.sharding.reduce_dtype, {"auto", "fp32", "bf16", "fp16"},
           "strategy.sharding.reduce_dtype");
  c.at_least<int64_t>(s.sharding.prefetch, 0, "strategy.sharding.prefetch");
  c.at_least<int64_t>(s.offload.activation_prefetch, 0, "strategy.offload.activation_prefetch");
  if (s.offload.params) {
    const auto traits = find_sharding_traits(s.sharding.mode);
    c.require(!traits || traits->shards_parameters, "strategy.offload.params",
              "needs strategy.sharding.mode zero3 (only zero3 shards the parameters), got '" +
                  s.sharding.mode + "'");
  }
}

void check_memory(const Checker& c, const MemoryConfig& m) {
  c.at_least<int64_t>(m.monitor_every, 0, "memory.monitor_every");
  c.at_least<int64_t>(m.empty_cache_every, 0, "memory.empty_cache_every");
  c.at_least<int64_t>(m.budget, 0, "memory.budget");
  c.at_least<int64_t>(m.history_max_events, 1, "memory.history_max_events");
  c.one_of(m.host_allocator, {"tuned", "system"}, "memory.host_allocator");
}

void check_distributed(const Checker& c, const DistributedConfig& d) {
  c.one_of(d.backend, {"auto", "nccl", "gloo"}, "distributed.backend");
  c.positive(d.timeout_s, "distributed.timeout_s");
}

}  // namespace

void validate(const Config& config, const KeyMarks* marks) {
  const Checker c(config, marks);
  check_run(c, config.run);
  check_model(c, config.model, config.data);
  check_data(c, config.data, config.model);
  check_optim(c, config.optim);
  check_schedule(c, config.schedule, config.optim);
  check_train(c, config.train);
  check_generate(c, config.generate);
  check_strategy(c, config.strategy);
  check_in_backward(c, config.optim, config.strategy);
  check_optimizer_sharding(c, config.optim, config.strategy);
  check_memory(c, config.memory);
  check_distributed(c, config.distributed);
}

}  // namespace frugal::config_detail

namespace frugal {

void validate(const Config& config) { config_detail::validate(config, nullptr); }

}  // namespace frugal
