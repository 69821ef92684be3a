// The optimizers, schedules and clipping against Python PyTorch from the same wheel: frugal
// trains an MLP for a few steps, Python replays the same steps from the same initial weights
// and data, and the final parameters must agree within 1e-6 relative (fp32, CPU).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "frugal/engine/engine.h"
#include "frugal/engine/state.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/mlp.h"
#include "frugal/optim/optimizer.h"
#include "support/helpers.h"

using namespace frugal;
using nlohmann::json;

namespace {

constexpr double kTolerance = 1e-6;

void check_against_python(const OptimConfig& oc, const ScheduleConfig& sc) {
  test::TempDir dir("frugal-optim");
  const int steps = 12;
  at::manual_seed(11);
  auto model = std::make_shared<Mlp>(5, std::vector<int64_t>{8, 8}, 4);
  io::write_safetensors(dir / "initial.safetensors", module_state(*model));

  Engine engine(EngineOptions{StrategyConfig{}, oc.clip_grad_norm});
  engine.setup(model, make_optimizer(oc, *model), std::make_shared<LrSchedule>(sc, oc.lr, steps));
  NamedTensors batches;
  for (int i = 0; i < steps; ++i) {
    Batch b{at::randn({6, 5}) * 3, at::randint(0, 4, {6}, at::kLong)};
    batches.emplace_back("x." + std::to_string(i), b.x);
    batches.emplace_back("y." + std::to_string(i), b.y);
    engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
  }
  io::write_safetensors(dir / "batches.safetensors", batches);
  io::write_safetensors(dir / "final.safetensors", module_state(*model));
  json order = json::array();
  for (const auto& p : model->named_parameters()) order.push_back(p.key());
  json setup = {{"steps", steps},
                {"tolerance", kTolerance},
                {"param_order", order},
                {"optim",
                 {{"type", oc.type}, {"lr", oc.lr}, {"betas", {oc.betas[0], oc.betas[1]}},
                  {"eps", oc.eps}, {"weight_decay", oc.weight_decay}, {"momentum", oc.momentum},
                  {"nesterov", oc.nesterov}, {"clip_grad_norm", oc.clip_grad_norm}}},
                {"schedule",
                 {{"type", sc.type}, {"warmup_steps", sc.warmup_steps}, {"min_lr", sc.min_lr},
                  {"decay_steps", sc.decay_steps}, {"step_size", sc.step_size},
                  {"gamma", sc.gamma}}}};
  test::write_text(dir / "setup.json", setup.dump());

  auto r = test::run_command(test::python() + " " +
                             test::quote((test::source_dir() / "tests/python/optim_reference.py").string()) +
                             " " + test::quote(dir.path().string()));
  INFO(oc.type << " / " << sc.type << ": " << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json out = json::parse(r.out);
  CHECK(out["max_rel_diff"].get<double>() <= kTolerance);
}

}  // namespace

TEST_CASE("AdamW + cosine warmup + clipping match torch.optim.AdamW", "[integration][python][optim]") {
  OptimConfig oc;
  oc.type = "adamw";
  oc.lr = 3e-2;
  oc.betas = {0.9, 0.95};
  oc.weight_decay = 0.1;
  oc.clip_grad_norm = 0.5;
  ScheduleConfig sc;
  sc.type = "cosine";
  sc.warmup_steps = 3;
  sc.min_lr = 1e-3;
  check_against_python(oc, sc);
}

TEST_CASE("Adam + linear decay match torch.optim.Adam", "[integration][python][optim]") {
  OptimConfig oc;
  oc.type = "adam";
  oc.lr = 1e-2;
  oc.weight_decay = 0.01;
  ScheduleConfig sc;
  sc.type = "linear";
  sc.warmup_steps = 2;
  check_against_python(oc, sc);
}

TEST_CASE("SGD nesterov + step schedule match torch.optim.SGD", "[integration][python][optim]") {
  OptimConfig oc;
  oc.type = "sgd";
  oc.lr = 5e-2;
  oc.momentum = 0.9;
  oc.nesterov = true;
  oc.weight_decay = 0.01;
  oc.clip_grad_norm = 1.0;
  ScheduleConfig sc;
  sc.type = "step";
  sc.step_size = 4;
  sc.gamma = 0.5;
  check_against_python(oc, sc);
}
