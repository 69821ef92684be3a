// Activation checkpointing is a memory-only change: with the same seed, every policy must give
// the plain run's loss and gradients bit for bit (dropout and autocast included), leave the
// random generators where the plain run leaves them, and keep less memory alive.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/gpt.h"
#include "frugal/models/unit.h"
#include "frugal/strategy/autocast.h"
#include "frugal/strategy/recompute.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/util/error.h"
#include "support/skip.h"

using namespace frugal;

namespace {

GptOptions ckpt_gpt(int64_t n_layer, double dropout) {
  return GptOptions::sized(64, 32, n_layer, 2, 32, dropout);
}

CheckpointingConfig policy(const std::string& name, int64_t k = 2,
                           std::vector<std::string> targets = {"attn"}) {
  CheckpointingConfig c;
  c.policy = name;
  c.k = k;
  c.targets = std::move(targets);
  return c;
}

std::string describe(const CheckpointingConfig& c) {
  std::string s = c.policy;
  if (c.policy == "every_k") s += " k=" + std::to_string(c.k);
  if (c.policy == "selective") {
    for (const auto& t : c.targets) s += " " + t;
  }
  return s;
}

at::Tensor cpu_rng_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

struct StepResult {
  std::vector<at::Tensor> losses;
  std::vector<at::Tensor> grads;   // after the last step's backward
  std::vector<at::Tensor> params;  // after the last step's backward
  at::Tensor rng;                  // CPU generator state after the last backward
  at::Tensor device_rng;           // CUDA generator state, on CUDA
  int64_t wrapped = 0;
};

// `steps` forward+backward passes of a fresh GPT (seeded) with `cfg` applied, an AdamW step
// between them. Batches are drawn from a separate generator so the model's dropout stream is
// the only consumer of the default one.
StepResult run_gpt(const CheckpointingConfig& cfg, int steps = 1, bool autocast = false,
                   bool shift_rng = false, c10::Device device = c10::Device(c10::kCPU)) {
  at::manual_seed(7);
  Gpt gpt(ckpt_gpt(4, 0.1));
  gpt.to(device);
  if (shift_rng) at::rand({1});  // moves the dropout stream on by one draw
  StepResult r;
  r.wrapped = apply_checkpointing(gpt, cfg, gpt.block_lists());
  torch::optim::AdamW opt(gpt.parameters(), torch::optim::AdamWOptions(1e-2));
  auto data_gen = at::make_generator<at::CPUGeneratorImpl>(123);
  for (int s = 0; s < steps; ++s) {
    if (s > 0) {
      opt.step();
      opt.zero_grad();
    }
    at::Tensor idx = at::randint(0, 64, {4, 32}, data_gen, at::kLong).to(device);  // (B, T)
    at::Tensor y = at::randint(0, 64, {4, 32}, data_gen, at::kLong).to(device);    // (B, T)
    at::Tensor loss;
    {
      AutocastGuard guard(device.type(), at::kBFloat16, autocast);
      loss = gpt.loss_sum(gpt.forward(idx), y) / static_cast<double>(y.numel());
    }
    loss.backward();  // outside autocast, as the engine does
    r.losses.push_back(loss.detach().clone());
  }
  for (const auto& p : gpt.parameters()) {
    r.grads.push_back(p.grad().clone());
    r.params.push_back(p.detach().clone());
  }
  r.rng = cpu_rng_state();
  if (device.is_cuda()) r.device_rng = at::globalContext().defaultGenerator(device).get_state();
  return r;
}

void require_identical(const StepResult& plain, const StepResult& ckpt) {
  REQUIRE(plain.losses.size() == ckpt.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    CHECK(at::equal(plain.losses[i], ckpt.losses[i]));
  }
  REQUIRE(plain.grads.size() == ckpt.grads.size());
  int64_t differing = 0;
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    if (!at::equal(plain.grads[i], ckpt.grads[i])) ++differing;
    if (!at::equal(plain.params[i], ckpt.params[i])) ++differing;
  }
  CHECK(differing == 0);
  CHECK(at::equal(plain.rng, ckpt.rng));
  CHECK(plain.device_rng.defined() == ckpt.device_rng.defined());
  if (plain.device_rng.defined()) CHECK(at::equal(plain.device_rng, ckpt.device_rng));
}

// A user block: not a GPT, written against frugal::Unit only.
class ResidualMlp : public Unit {
 public:
  explicit ResidualMlp(int64_t d) {
    fc = register_module("fc", torch::nn::Linear(d, 2 * d));
    out = register_module("out", torch::nn::Linear(2 * d, d));
    drop = register_module("drop", torch::nn::Dropout(0.25));
  }
  torch::nn::Linear fc{nullptr}, out{nullptr};
  torch::nn::Dropout drop{nullptr};

 protected:
  at::Tensor forward_impl(const at::Tensor& x) override {  // (N, d) -> (N, d)
    return x + drop->forward(out->forward(at::gelu(fc->forward(x))));
  }
};

class ResidualStack : public torch::nn::Module {
 public:
  ResidualStack(int64_t d, int64_t depth) {
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < depth; ++i) layers->push_back(std::make_shared<ResidualMlp>(d));
    head = register_module("head", torch::nn::Linear(d, 1));
  }
  at::Tensor forward(at::Tensor x) {  // (N, d) -> (N, 1)
    for (const auto& layer : *layers) x = layer->as<ResidualMlp>()->forward(x);
    return head->forward(x);
  }
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace

TEST_CASE("Unit wrappers nest by layer, replace by name, and run forward_impl innermost",
          "[checkpointing][unit]") {
  ResidualMlp unit(4);
  std::vector<std::string> trace;
  auto tracer = [&](std::string tag) {
    return [&trace, tag](const at::Tensor& x, const UnitFn& inner) {
      trace.push_back(tag + ">");
      at::Tensor y = inner(x);
      trace.push_back("<" + tag);
      return y;
    };
  };
  // Sharding installed first still ends up outside checkpointing.
  unit.set_wrapper("shard", wrap_layer::kShard, tracer("shard"));
  unit.set_wrapper("ckpt", wrap_layer::kCheckpoint, tracer("ckpt"));
  unit.set_wrapper("ckpt", wrap_layer::kCheckpoint, tracer("ckpt"));  // replaces, no duplicate
  CHECK(unit.wrapper_names() == std::vector<std::string>{"shard", "ckpt"});
  at::Tensor x = at::randn({3, 4});
  at::Tensor plain;
  {
    torch::NoGradGuard no_grad;
    unit.eval();
    plain = unit.forward(x);
  }
  CHECK(trace == std::vector<std::string>{"shard>", "ckpt>", "<ckpt", "<shard"});
  // Equal layers: the newest is outermost.
  unit.set_wrapper("other", wrap_layer::kShard, tracer("other"));
  CHECK(unit.wrapper_names() == std::vector<std::string>{"other", "shard", "ckpt"});
  CHECK(unit.remove_wrapper("shard"));
  CHECK_FALSE(unit.remove_wrapper("shard"));
  CHECK(unit.has_wrapper("ckpt"));
  unit.clear_wrappers();
  CHECK(unit.wrapper_names().empty());
  torch::NoGradGuard no_grad;
  CHECK(at::equal(unit.forward(x), plain));
}

TEST_CASE("GPT parameter names are unchanged by Units and checkpointing", "[checkpointing][unit]") {
  Gpt plain(ckpt_gpt(2, 0.0));
  Gpt wrapped(ckpt_gpt(2, 0.0));
  apply_checkpointing(wrapped, policy("full"), wrapped.block_lists());
  std::vector<std::string> a, b;
  for (const auto& p : plain.named_parameters()) a.push_back(p.key());
  for (const auto& p : wrapped.named_parameters()) b.push_back(p.key());
  CHECK(a == b);
}

TEST_CASE("every policy gives the plain run's loss, gradients and RNG state bit for bit",
          "[checkpointing][unit]") {
  const StepResult plain = run_gpt(policy("none"));
  CHECK(plain.wrapped == 0);
  const std::vector<std::pair<CheckpointingConfig, int64_t>> cases = {
      {policy("full"), 4},
      {policy("every_k", 2), 2},
      {policy("every_k", 3), 2},
      {policy("selective", 2, {"attn"}), 4},
      {policy("selective", 2, {"mlp"}), 4},
      {policy("selective", 2, {"attn", "mlp"}), 8},
  };
  for (const auto& [cfg, expected_units] : cases) {
    SECTION(describe(cfg)) {
      const StepResult ckpt = run_gpt(cfg);
      CHECK(ckpt.wrapped == expected_units);
      require_identical(plain, ckpt);
    }
  }
}

TEST_CASE("dropout makes the check meaningful: another dropout stream changes the gradients",
          "[checkpointing][unit]") {
  // The negative control for the test above: a recompute drawing fresh dropout masks would
  // not reproduce the gradients, because different masks give different gradients.
  const StepResult a = run_gpt(policy("none"));
  const StepResult b = run_gpt(policy("none"));
  const StepResult shifted = run_gpt(policy("none"), 1, false, /*shift_rng=*/true);
  int64_t same = 0, differing = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    same += at::equal(a.grads[i], b.grads[i]);
    differing += !at::equal(a.grads[i], shifted.grads[i]);
  }
  CHECK(same == static_cast<int64_t>(a.grads.size()));  // deterministic when seeded alike
  CHECK(differing == static_cast<int64_t>(a.grads.size()));
}

TEST_CASE("two optimizer steps with checkpointing stay bit-identical", "[checkpointing][unit]") {
  const StepResult plain = run_gpt(policy("none"), /*steps=*/2);
  for (const auto& cfg : {policy("full"), policy("every_k", 2), policy("selective", 2, {"mlp"})}) {
    SECTION(describe(cfg)) { require_identical(plain, run_gpt(cfg, /*steps=*/2)); }
  }
}

TEST_CASE("checkpointed blocks under CPU bf16 autocast give the plain gradients",
          "[checkpointing][unit]") {
  const StepResult plain = run_gpt(policy("none"), 1, /*autocast=*/true);
  CHECK(plain.losses[0].scalar_type() == at::kFloat);
  for (const auto& cfg : {policy("full"), policy("selective", 2, {"attn", "mlp"})}) {
    SECTION(describe(cfg)) { require_identical(plain, run_gpt(cfg, 1, /*autocast=*/true)); }
  }
  // Autocast must not leak out of the replay.
  CHECK_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
}

TEST_CASE("on CUDA, checkpointing replays and restores the device's generator",
          "[checkpointing][cuda]") {
  if (test::skip_without_cuda()) return;
  const c10::Device cuda(c10::kCUDA, 0);
  const StepResult plain = run_gpt(policy("none"), 2, false, false, cuda);
  for (const auto& cfg : {policy("full"), policy("selective", 2, {"attn", "mlp"})}) {
    SECTION(describe(cfg)) { require_identical(plain, run_gpt(cfg, 2, false, false, cuda)); }
  }
  const StepResult plain_bf16 = run_gpt(policy("none"), 1, true, false, cuda);
  require_identical(plain_bf16, run_gpt(policy("full"), 1, true, false, cuda));
}

TEST_CASE("a weight used inside and outside a checkpointed unit under autocast: plain grads",
          "[checkpointing][unit]") {
  // Autocast caches a weight's bf16 cast for the whole region, and the forward of a
  // checkpointed unit builds the same graph as a plain one: the cast is shared by both uses,
  // their gradients meet in bf16 as in the plain run, and w's gradient is the plain one.
  class Project : public Unit {
   public:
    Project() { w = register_parameter("w", at::randn({8, 8})); }
    at::Tensor w;  // (8, 8)

   protected:
    at::Tensor forward_impl(const at::Tensor& x) override { return at::tanh(at::mm(x, w)); }
  };
  auto grad_of_w = [](bool checkpointed) {
    at::manual_seed(4);
    Project unit;
    if (checkpointed) checkpoint_unit(unit);
    at::Tensor x = at::randn({4, 8});  // (N, 8)
    at::Tensor loss;
    {
      AutocastGuard guard(c10::DeviceType::CPU, at::kBFloat16);
      loss = at::mm(unit.forward(x), unit.w).to(at::kFloat).sum();  // w again, outside the unit
    }
    loss.backward();
    return unit.w.grad().clone();
  };
  CHECK(at::equal(grad_of_w(false), grad_of_w(true)));
}

TEST_CASE("a user-defined Unit is checkpointed with identical gradients", "[checkpointing][unit]") {
  auto run = [](bool checkpointed, bool input_requires_grad) {
    at::manual_seed(11);
    ResidualStack net(16, 3);
    if (checkpointed) REQUIRE(apply_checkpointing(net, policy("full"), {"layers"}) == 3);
    at::Tensor x = at::randn({64, 16});  // (N, d)
    if (input_requires_grad) x.requires_grad_(true);
    net.forward(x).pow(2).mean().backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : net.parameters()) grads.push_back(p.grad().clone());
    if (input_requires_grad) grads.push_back(x.grad().clone());
    grads.push_back(cpu_rng_state());
    return grads;
  };
  for (bool input_grad : {false, true}) {
    SECTION(input_grad ? "input requires grad" : "input does not require grad") {
      const auto plain = run(false, input_grad);
      const auto ckpt = run(true, input_grad);
      REQUIRE(plain.size() == ckpt.size());
      for (size_t i = 0; i < plain.size(); ++i) CHECK(at::equal(plain[i], ckpt[i]));
    }
  }
}

TEST_CASE("frugal::checkpoint on a plain function", "[checkpointing][unit]") {
  at::manual_seed(5);
  at::Tensor w = at::randn({8, 8}).requires_grad_(true);  // (in, out)
  auto fn = [&](const at::Tensor& x) { return at::dropout(at::tanh(x.mm(w)), 0.5, true); };
  at::Tensor x0 = at::randn({4, 8});  // (N, in)

  auto grads = [&](bool checkpointed) {
    at::manual_seed(9);
    w.mutable_grad() = at::Tensor();
    at::Tensor x = x0.clone().requires_grad_(true);
    at::Tensor y = checkpointed ? checkpoint(fn, x) : fn(x);
    y.sum().backward();
    return std::vector<at::Tensor>{w.grad().clone(), x.grad().clone(), cpu_rng_state()};
  };
  const auto plain = grads(false);
  const auto ckpt = grads(true);
  for (size_t i = 0; i < plain.size(); ++i) CHECK(at::equal(plain[i], ckpt[i]));

  // Under no-grad the function just runs.
  torch::NoGradGuard no_grad;
  at::manual_seed(9);
  at::Tensor a = fn(x0);
  at::manual_seed(9);
  at::Tensor b = checkpoint(fn, x0);
  CHECK(at::equal(a, b));
  CHECK_FALSE(b.requires_grad());
}

TEST_CASE("the recompute stops after the last tensor backward needs", "[checkpointing][unit]") {
  // tanh saves its result: once that is recomputed, nothing after it runs again. A plain
  // (reentrant) recompute would run the whole function and count 2 calls of `after`.
  at::manual_seed(6);
  at::Tensor w = at::randn({8, 8}).requires_grad_(true);
  int after_calls = 0;
  auto fn = [&](const at::Tensor& x) {
    at::Tensor h = at::tanh(x.mm(w));
    ++after_calls;
    return h * 2.0 + 1.0;  // saves nothing (a constant factor, a constant shift)
  };
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  checkpoint(fn, x).sum().backward();
  CHECK(after_calls == 1);
  at::Tensor expected = (1 - at::tanh(x.detach().mm(w.detach())).pow(2)).mm(w.detach().t()) * 2.0;
  CHECK(at::allclose(x.grad(), expected, 1e-6, 1e-6));
}

TEST_CASE("checkpointed gradients through autograd::grad, backward inputs and retain_graph",
          "[checkpointing][unit]") {
  at::manual_seed(7);
  at::Tensor w = at::randn({8, 8}).requires_grad_(true);
  auto fn = [&](const at::Tensor& x) { return at::gelu(x.mm(w)).mm(w); };
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const auto plain = torch::autograd::grad({fn(x).pow(2).sum()}, {x, w});
  const auto ckpt = torch::autograd::grad({checkpoint(fn, x).pow(2).sum()}, {x, w});
  CHECK(at::equal(plain[0], ckpt[0]));
  CHECK(at::equal(plain[1], ckpt[1]));

  // Two backwards through one graph: the second recomputes again.
  at::Tensor loss = checkpoint(fn, x).pow(2).sum();
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  CHECK(at::equal(x.grad(), 2 * plain[0]));
  CHECK(at::equal(w.grad(), 2 * plain[1]));

  // Only the input's gradient asked for: the weight's stays as it was.
  x.mutable_grad() = at::Tensor();
  w.mutable_grad() = at::Tensor();
  checkpoint(fn, x).pow(2).sum().backward({}, false, false, {x});
  CHECK(at::equal(x.grad(), plain[0]));
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("a checkpointed function that changes between forward and recompute is an error",
          "[checkpointing][unit][bad_input]") {
  at::Tensor w = at::randn({8, 8}).requires_grad_(true);
  bool first = true;
  auto fn = [&](const at::Tensor& x) {
    at::Tensor h = x.mm(w);
    if (first) h = at::tanh(h);  // the forward saves one tensor more than the recompute
    first = false;
    return at::sigmoid(h);
  };
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  at::Tensor y = checkpoint(fn, x).sum();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("must run the same operations every time"));

  // The input changed in place after the forward.
  auto g = [&](const at::Tensor& in) { return at::tanh(in.mm(w)); };
  at::Tensor z = at::randn({4, 8});
  at::Tensor out = checkpoint(g, z).sum();
  z.add_(1.0);
  CHECK_THROWS_WITH(out.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("applying checkpointing again replaces it instead of wrapping twice",
          "[checkpointing][unit]") {
  Gpt gpt(ckpt_gpt(4, 0.0));
  auto block = [&](size_t i) { return gpt.blocks->ptr<GptBlock>(i); };
  CHECK(apply_checkpointing(gpt, policy("full"), {"blocks"}) == 4);
  CHECK(apply_checkpointing(gpt, policy("full"), {"blocks"}) == 4);
  CHECK(block(0)->wrapper_names() == std::vector<std::string>{kCheckpointWrapperName});
  // Switching policy moves the wrappers.
  CHECK(apply_checkpointing(gpt, policy("selective", 2, {"attn", "attn"}), {"blocks"}) == 4);
  CHECK(block(0)->wrapper_names().empty());
  CHECK(block(1)->attn->has_wrapper(kCheckpointWrapperName));
  CHECK_FALSE(block(1)->mlp->has_wrapper(kCheckpointWrapperName));
  // Other strategies' wrappers are left alone and stay outside.
  block(2)->set_wrapper("shard", wrap_layer::kShard,
                        [](const at::Tensor& x, const UnitFn& inner) { return inner(x); });
  CHECK(apply_checkpointing(gpt, policy("every_k", 2), {"blocks"}) == 2);
  CHECK(block(2)->wrapper_names() == std::vector<std::string>{"shard", kCheckpointWrapperName});
  CHECK(apply_checkpointing(gpt, policy("none"), {"blocks"}) == 0);
  CHECK(block(2)->wrapper_names() == std::vector<std::string>{"shard"});
  CHECK_FALSE(block(1)->attn->has_wrapper(kCheckpointWrapperName));
}

TEST_CASE("checkpointing errors name the module and the fix", "[checkpointing][unit]") {
  Gpt gpt(ckpt_gpt(2, 0.0));
  auto message_of = [&](torch::nn::Module& model, const CheckpointingConfig& cfg,
                        const std::vector<std::string>& lists) -> std::string {
    try {
      apply_checkpointing(model, cfg, lists);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  REQUIRE(apply_checkpointing(gpt, policy("full"), {"blocks"}) == 2);

  std::string m = message_of(gpt, policy("selective", 2, {"attn", "feedforward"}), {"blocks"});
  CHECK_THAT(m, Catch::Contains("'feedforward' is not a child of blocks.0"));
  CHECK_THAT(m, Catch::Contains("ln1, attn, ln2, mlp"));
  m = message_of(gpt, policy("selective", 2, {"ln1"}), {"blocks"});
  CHECK_THAT(m, Catch::Contains("blocks.0.ln1 is a torch::nn::LayerNormImpl, not a frugal::Unit"));
  CHECK_THAT(message_of(gpt, policy("sometimes"), {"blocks"}), Catch::Contains("unknown policy"));
  CHECK_THAT(message_of(gpt, policy("every_k", 0), {"blocks"}), Catch::Contains("k >= 1"));
  CHECK_THAT(message_of(gpt, policy("full"), {"layers"}),
             Catch::Contains("no module list 'layers'"));
  CHECK_THAT(message_of(gpt, policy("full"), {"ln_f"}),
             Catch::Contains("not a torch::nn::ModuleList"));
  CHECK_THAT(message_of(gpt, policy("full"), {}), Catch::Contains("block lists"));
  // A failed apply leaves the previous checkpointing in place.
  CHECK(gpt.blocks->ptr<GptBlock>(1)->has_wrapper(kCheckpointWrapperName));

  // Blocks that are plain modules.
  torch::nn::Module net;
  auto list = net.register_module("blocks", torch::nn::ModuleList());
  list->push_back(torch::nn::Linear(4, 4));
  m = message_of(net, policy("full"), {"blocks"});
  CHECK_THAT(m, Catch::Contains("blocks.0 is a torch::nn::LinearImpl, not a frugal::Unit: derive "
                                "it from frugal::Unit or call frugal::checkpoint in its forward"));
  CHECK(message_of(net, policy("none"), {"blocks"}) == "(no error)");
}

TEST_CASE("full checkpointing keeps at most half the activation memory of none",
          "[checkpointing][integration][memory]") {
  memory::install_cpu_tracking();
  // 12 narrow blocks over a long sequence: activations (B, T, C) dominate the parameters.
  GptOptions o = ckpt_gpt(12, 0.0);
  o.block_size = 256;
  const int64_t B = 8, T = 256;
  auto measure = [&](const CheckpointingConfig& cfg) {
    at::manual_seed(3);
    Gpt gpt(o);
    apply_checkpointing(gpt, cfg, gpt.block_lists());
    at::Tensor idx = at::randint(0, o.vocab_size, {B, T}, at::kLong);
    at::Tensor y = at::randint(0, o.vocab_size, {B, T}, at::kLong);
    const int64_t before = memory::cpu_counters().current_bytes;
    memory::reset_cpu_peak();
    (gpt.loss_sum(gpt.forward(idx), y) / static_cast<double>(y.numel())).backward();
    return memory::cpu_counters().peak_bytes - before;
  };
  const int64_t none = measure(policy("none"));
  const int64_t full = measure(policy("full"));
  const int64_t every2 = measure(policy("every_k", 2));
  const int64_t sel_attn = measure(policy("selective", 2, {"attn"}));
  const int64_t sel_both = measure(policy("selective", 2, {"attn", "mlp"}));
  std::ostringstream report;
  auto line = [&](const char* name, int64_t bytes) {
    report << name << ": " << bytes / 1024 << " KiB peak above the pre-forward level ("
           << 100 * bytes / none << "% of none)\n";
  };
  report << "12-block GPT, C=32, B=8, T=256, activation (B, T, C) = " << B * T * o.n_embd * 4 / 1024
         << " KiB\n";
  line("none", none);
  line("full", full);
  line("every_k 2", every2);
  line("selective attn", sel_attn);
  line("selective attn+mlp", sel_both);
  WARN(report.str());
  CHECK(full * 2 <= none);
  CHECK(full < every2);
  CHECK(every2 < none);
  CHECK(sel_both < sel_attn);
  CHECK(sel_attn < none);
}
