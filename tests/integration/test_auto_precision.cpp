// strategy.precision: auto on this machine's CPU: bf16-mixed when /proc/cpuinfo lists bf16
// instructions (avx512_bf16, amx_bf16), fp32 otherwise. From YAML, config.resolved.yaml
// records the choice and the losses equal a run given that precision by name; from C++, the
// Engine resolves it at setup() to the same losses.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/engine/engine.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

std::string expected_cpu_precision() {
  const std::string info = test::read_text("/proc/cpuinfo");
  const bool bf16 = info.find(" avx512_bf16") != std::string::npos ||
                    info.find(" amx_bf16") != std::string::npos;
  return bf16 ? "bf16-mixed" : "fp32";
}

std::vector<double> engine_losses(const std::string& precision) {
  at::manual_seed(2);
  auto model = make_model(test::transformer_config("gpt", 1, 2, 32, 8, 64));
  StrategyConfig sc;
  sc.precision = precision;
  Engine engine(EngineOptions{sc, 0.0});
  engine.setup(model, make_optimizer(OptimConfig{}, *model));
  std::vector<double> out;
  at::manual_seed(3);
  for (int s = 0; s < 3; ++s) {
    const at::Tensor seq = at::randint(0, 64, {4, 9}, at::kLong);
    out.push_back(engine.step(Batch{seq.narrow(1, 0, 8), seq.narrow(1, 1, 8)},
                              [&](const Batch& b) { return model->batch_loss_sum(b); })
                      .loss);
  }
  return out;
}

}  // namespace

TEST_CASE("strategy.precision auto picks by the CPU's bf16 instructions, from YAML and C++",
          "[integration][precision][cli]") {
  const std::string want = expected_cpu_precision();
  INFO("expected " << want);
  CHECK(engine_losses("auto") == engine_losses(want));

  test::TempDir dir("frugal-auto-precision");
  auto run = [&](const std::string& name, const std::string& precision) {
    auto r = test::run_command(test::frugal_binary() + " train --set run.dir=" +
                               test::quote(dir.path().string()) + " --set run.name=" + name +
                               " --set strategy.precision=" + precision +
                               " --set train.max_steps=3 --set train.log_every=1"
                               " --set train.eval_batches=0 --set train.progress=none"
                               " --set train.checkpoint_every=0 --set generate.tokens=0",
                               300);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const std::string out = run("auto", "auto");
  CHECK_THAT(out, Catch::Contains("strategy.precision auto: " + want + " on cpu"));
  CHECK_THAT(test::read_text(dir / "auto" / "config.resolved.yaml"),
             Catch::Contains("precision: \"" + want + "\""));
  run("named", want);
  CHECK(test::read_text(dir / "auto" / "metrics.jsonl").size() > 0);
  auto losses = [&](const std::string& name) {
    std::vector<double> l;
    std::istringstream lines(test::read_text(dir / name / "metrics.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss") && j.contains("step")) l.push_back(j.at("loss").get<double>());
    }
    return l;
  };
  CHECK(losses("auto").size() == 3);
  CHECK(losses("auto") == losses("named"));
}
