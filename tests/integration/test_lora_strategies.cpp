// Frozen parameters under every strategy: a tiny Llama with LoRA adapters (the rest frozen)
// trains under each sharding mode (Gloo, world 1), offload, checkpointing policy, precision,
// accumulation, optimizer in backward and the 8-bit / Adafactor states, and each run
//   - leaves every frozen weight bit for bit as it was, with no gradient (zero3: sharded, none
//     held whole between steps),
//   - keeps optimizer state and checkpoint entries for the adapters only,
//   - trains the adapters as the plain run does (fp32: within 1e-5; bf16: losses within 3%).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "frugal/config/load.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/models/finetune.h"
#include "frugal/models/llama.h"
#include "frugal/optim/optimizer.h"
#include "frugal/train/trainer.h"
#include "support/cli.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace lora_strategies_test {

struct Setting {
  std::string name;
  StrategyConfig strategy;
  OptimConfig optim;
  bool in_backward = false;
};

struct Result {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> trained;  // the adapters after the last step
  std::set<std::string> frozen;               // the frozen parameters' names
  StateDict state;
};

ModelConfig lora_config() {
  ModelConfig m;
  m.type = "llama";
  m.lora.rank = 4;
  m.lora.alpha = 8;
  m.lora.targets = {"q_proj", "v_proj", "down_proj"};
  m.freeze = {"norm.weight"};  // the final norm, besides what LoRA freezes
  return m;
}

std::shared_ptr<Llama> tiny_llama() {
  return std::make_shared<Llama>(test::small_llama_options(2, 4, 2, 32, 64, 48, /*qkv_bias=*/true));
}

Result train(const Setting& s, const std::shared_ptr<dist::Communicator>& comm) {
  INFO(s.name);
  at::manual_seed(21);
  auto model = tiny_llama();
  apply_finetuning(*model, lora_config());
  std::map<std::string, at::Tensor> frozen;
  for (const auto& p : model->named_parameters()) {
    if (!p.value().requires_grad()) frozen[p.key()] = p.value().detach().clone();
  }
  REQUIRE(frozen.size() > 10);
  Result r;
  for (const auto& [name, t] : frozen) r.frozen.insert(name);
  const bool sharded = s.strategy.sharding.mode != "none";
  Engine engine(EngineOptions{s.strategy, 0.0, s.in_backward}, sharded ? comm : nullptr);
  engine.setup(model, make_optimizer(s.optim, *model));
  for (int step = 0; step < 4; ++step) {
    at::manual_seed(300 + step);
    at::Tensor seq = at::randint(0, 48, {4, 17}, at::kLong);
    Batch b{seq.slice(1, 0, 16), seq.slice(1, 1, 17)};
    StepStats st = engine.step(b, [&](const Batch& mb) { return model->batch_loss_sum(mb); });
    REQUIRE_FALSE(st.skipped);
    r.losses.push_back(st.loss);
  }
  // zero3 shards the frozen weights too: between steps none is held whole.
  const bool zero3 = s.strategy.sharding.mode == "zero3";
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    if (frozen.count(p.key()) != 0) CHECK((p.value().storage().nbytes() == 0) == zero3);
  }
  r.state = engine.state_dict();
  // Whole parameters for the comparison (zero3 holds shards between steps).
  engine.sharding().set_full_parameters(true);
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    auto it = frozen.find(p.key());
    if (it != frozen.end()) {
      CHECK_FALSE(p.value().requires_grad());
      CHECK_FALSE(p.value().grad().defined());
      CHECK(at::equal(p.value().detach(), it->second));
    } else {
      r.trained[p.key()] = p.value().detach().clone().to(at::kFloat);
    }
  }
  engine.sharding().set_full_parameters(false);
  return r;
}

// The parameter names a state holds: model tensors, the parameters its optimizer entries
// belong to, and the names its shards' layout lists.
void check_state(const Result& r, const std::set<std::string>& adapters) {
  std::set<std::string> in_model, in_optimizer;
  for (const auto& [name, t] : r.state.model) in_model.insert(name);
  for (const auto& [name, t] : r.state.optimizer) in_optimizer.insert(name.substr(0, name.rfind('/')));
  for (const std::string& name : r.frozen) {
    INFO(name);
    CHECK(in_model.count(name) == 0);
    CHECK(in_optimizer.count(name) == 0);
    CHECK(r.state.layout_json.find("\"" + name + "\"") == std::string::npos);
  }
  for (const std::string& name : adapters) {
    INFO(name);
    // Whole in the state, or listed in the shards' layout.
    CHECK((in_model.count(name) == 1 ||
           r.state.layout_json.find("\"" + name + "\"") != std::string::npos));
  }
}

void check_same(const Result& a, const Result& b, double tol) {
  REQUIRE(a.trained.size() == b.trained.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    CHECK(std::abs(a.losses[i] - b.losses[i]) <= tol * std::abs(b.losses[i]));
  }
  for (const auto& [name, t] : a.trained) {
    INFO(name);
    CHECK(at::allclose(t, b.trained.at(name), tol, tol));
  }
}


TEST_CASE("lora: frozen weights stay frozen under every strategy", "[integration][lora]") {
  auto comm = dist::init_from_env(DistributedConfig{}, dist::RankInfo{});  // Gloo, rank 0 of 1
  Setting plain{"none"};
  plain.optim.lr = 1e-2;
  const Result ref = train(plain, comm);
  REQUIRE(ref.trained.size() == 12);  // 3 layers x 2 blocks x (A, B)
  std::set<std::string> adapters;
  for (const auto& [name, t] : ref.trained) adapters.insert(name);
  check_state(ref, adapters);
  // The adapters moved (B from zero, and A once B was not).
  for (const auto& [name, t] : ref.trained) CHECK(t.abs().max().item<double>() > 0);

  std::vector<Setting> exact;  // each must train as the plain run, within 1e-5
  auto add = [&](const std::string& name, const std::function<void(Setting&)>& edit) {
    Setting s = plain;
    s.name = name;
    edit(s);
    exact.push_back(s);
  };
  add("checkpointing full", [](Setting& s) { s.strategy.checkpointing.policy = "full"; });
  add("checkpointing selective", [](Setting& s) {
    s.strategy.checkpointing.policy = "selective";
    s.strategy.checkpointing.targets = {"self_attn"};
  });
  add("checkpointing every_k", [](Setting& s) {
    s.strategy.checkpointing.policy = "every_k";
    s.strategy.checkpointing.k = 2;
  });
  add("accumulation 2", [](Setting& s) { s.strategy.accumulation = 2; });
  for (const char* mode : {"ddp", "zero1", "zero2", "zero3"}) {
    add(fmt::format("sharding {}", mode), [mode](Setting& s) { s.strategy.sharding.mode = mode; });
  }
  add("zero3 + full checkpointing + accumulation 2", [](Setting& s) {
    s.strategy.sharding.mode = "zero3";
    s.strategy.checkpointing.policy = "full";
    s.strategy.accumulation = 2;
  });
  add("offload optimizer", [](Setting& s) { s.strategy.offload.optimizer = true; });
  add("zero3 + offload params", [](Setting& s) {
    s.strategy.sharding.mode = "zero3";
    s.strategy.offload.params = true;
  });
  add("offload activations", [](Setting& s) { s.strategy.offload.activations = true; });
  add("optimizer in backward", [](Setting& s) { s.in_backward = true; });
  for (const Setting& s : exact) {
    INFO(s.name);
    const Result r = train(s, comm);
    check_same(r, ref, 1e-5);
    check_state(r, adapters);
  }

  // Mixed precision tracks fp32.
  for (const char* precision : {"bf16-mixed", "fp16-mixed"}) {
    Setting s = plain;
    s.name = precision;
    s.strategy.precision = precision;
    const Result r = train(s, comm);
    INFO(s.name);
    for (size_t i = 0; i < r.losses.size(); ++i) {
      CHECK(std::abs(r.losses[i] - ref.losses[i]) <= 0.03 * ref.losses[i]);
    }
    check_state(r, adapters);
  }

  // The 8-bit and factored states: adapters only, and the same under ddp as alone (zero's flat
  // shards cut the 8-bit blocks and the factored matrices differently, by design).
  for (const char* type : {"adamw8bit", "adafactor"}) {
    Setting s = plain;
    s.name = type;
    s.optim.type = type;
    s.optim.quant_block = 64;
    const Result alone = train(s, comm);
    check_state(alone, adapters);
    s.name = std::string(type) + " ddp";
    s.strategy.sharding.mode = "ddp";
    const Result sharded = train(s, comm);
    INFO(s.name);
    check_same(sharded, alone, 1e-5);
    check_state(sharded, adapters);
  }
}

}  // namespace lora_strategies_test

TEST_CASE("lora under bf16-mixed: the frozen base stored in bf16 trains exactly as in fp32",
          "[integration][lora]") {
  // model.frozen_dtype auto keeps the frozen linear weights in autocast's dtype: every use of
  // them is that rounded copy anyway, so the losses are the same, bit for bit, and the base
  // takes half the bytes. The final samples (generate.tokens) run them outside training too.
  test::TempDir runs("frugal-frozen-dtype");
  auto run = [&](const std::string& frozen_dtype) {
    const std::string model = test::transformer_yaml(
        "llama", 2, 4, 64, 32, 96,
        "intermediate_size: 128, tie_embeddings: false, "
        "lora: {rank: 4, alpha: 8, targets: all-linear}, frozen_dtype: " + frozen_dtype);
    const Config cfg = load_config_string(fmt::format(R"(
run: {{name: {0}, dir: '{1}', seed: 4}}
model: {2}
data: {{type: synthetic, micro_batch_size: 4, synthetic_samples: 64}}
strategy: {{precision: bf16-mixed}}
optim: {{lr: 0.01}}
train: {{max_steps: 3, log_every: 1, checkpoint_every: 0, progress: none, eval_batches: 0}}
generate: {{tokens: 4}}
)",
                                                      frozen_dtype, runs.path().string(), model),
                                          "frozen.yaml");
    const TrainResult r = Trainer(cfg).run();
    REQUIRE(r.steps == 3);
    return test::step_rows(runs / frozen_dtype / "metrics.jsonl");
  };
  const auto fp32 = run("fp32");
  const auto bf16 = run("auto");
  REQUIRE(fp32.size() == 3);
  REQUIRE(bf16.size() == 3);
  // The frozen linear weights: 2 blocks x (4 x 64 x 64 + 3 x 128 x 64), and the 96 x 64 head.
  const int64_t frozen_linear = 2 * (4 * 64 * 64 + 3 * 128 * 64) + 96 * 64;
  for (size_t i = 0; i < 3; ++i) {
    CHECK(bf16[i]["loss"].get<double>() == fp32[i]["loss"].get<double>());
    CHECK(bf16[i]["grad_norm"].get<double>() == fp32[i]["grad_norm"].get<double>());
    // Two bytes a frozen linear weight fewer between steps.
    CHECK(fp32[i]["mem_allocated_bytes"].get<int64_t>() -
              bf16[i]["mem_allocated_bytes"].get<int64_t>() ==
          2 * frozen_linear);
  }
}
