// Non-finite steps (train.on_nonfinite, train/nonfinite_guard.h): in fp32, bf16-mixed and
// fp16-mixed a step whose loss or gradients are not finite leaves the parameters bit for bit
// as they were, the guard names the first parameter whose gradient went bad, a finite step
// resets the count, halt stops at once (except fp16's overflow, the scaler's signal), a run of
// bad steps stops with advice (bf16 for fp16's collapsed loss scale), and a run whose
// parameters went non-finite never writes a checkpoint of them.
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "frugal/engine/engine.h"
#include "frugal/models/mlp.h"
#include "frugal/train/checkpoint_manager.h"
#include "frugal/train/nonfinite_guard.h"
#include "frugal/util/error.h"
#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;

namespace {

struct NonFiniteRig {
  std::shared_ptr<Mlp> model;
  std::unique_ptr<Engine> engine;
  Batch batch;
  // Which step gets a non-finite gradient on the head's weight only (-1: none, 0: every
  // step), and whether the loss itself is then NaN too.
  int64_t bad_step = -1;
  bool bad_loss = false;
  std::shared_ptr<bool> poison_gradient = std::make_shared<bool>(false);

  explicit NonFiniteRig(const std::string& precision) {
    at::manual_seed(5);
    model = std::make_shared<Mlp>(8, std::vector<int64_t>{16}, 4);
    // The head's gradient turns inf on a poisoned step (the loss stays finite).
    model->named_parameters()["head.weight"].register_hook([flag = poison_gradient](at::Tensor g) {
      return *flag ? g * std::numeric_limits<float>::infinity() : g;
    });
    StrategyConfig sc;
    sc.precision = precision;
    engine = std::make_unique<Engine>(EngineOptions{sc, 0.0});
    engine->setup(model, std::make_shared<torch::optim::SGD>(model->parameters(),
                                                             torch::optim::SGDOptions(0.1)));
    batch = Batch{at::randn({6, 8}), at::randint(0, 4, {6}, at::kLong)};
  }

  StepStats step() {
    const int64_t next = engine->steps_done() + 1;
    const bool bad = bad_step == 0 || bad_step == next;
    *poison_gradient = bad && !bad_loss;
    return engine->step(batch, [&](const Batch& mb) {
      at::Tensor loss = model->loss_sum(model->forward(mb.x), mb.y);
      if (!bad || !bad_loss) return loss;
      // inf * w summed over weights of both signs: a NaN loss, and an inf gradient for the
      // head's weight alone (every other gradient stays finite).
      const at::Tensor& w = model->named_parameters()["head.weight"];
      return loss + w.mul(std::numeric_limits<float>::infinity()).sum();
    });
  }

  std::vector<at::Tensor> params() const {
    std::vector<at::Tensor> out;
    for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  }
};

bool same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a non-finite step is skipped, named and counted in fp32, bf16 and fp16",
          "[integration][nonfinite]") {
  for (const std::string precision : {"fp32", "bf16-mixed", "fp16-mixed"}) {
    for (const bool bad_loss : {false, true}) {
      INFO(precision << (bad_loss ? ", NaN loss" : ", inf gradient"));
      NonFiniteRig rig(precision);
      rig.bad_step = 2;
      rig.bad_loss = bad_loss;
      NonFiniteGuard guard({"skip", 3, precision});
      CHECK(guard.check(rig.step(), false).empty());
      const auto before = rig.params();
      const StepStats bad = rig.step();
      CHECK(bad.skipped);
      CHECK(bad.nonfinite_gradient == "head.weight");
      // The skipped step left every parameter bit for bit as it was.
      CHECK(same(before, rig.params()));
      const std::string line = guard.check(bad, false);
      CHECK_THAT(line, Catch::Contains("step 2") && Catch::Contains("update skipped (1 in a row)") &&
                           Catch::Contains("head.weight"));
      // A finite step updates again and resets the count.
      CHECK(guard.check(rig.step(), false).empty());
      CHECK(!same(before, rig.params()));
      CHECK(guard.consecutive() == 0);
      CHECK(guard.total_skipped() == 1);
    }
  }
}

TEST_CASE("halt stops at the first bad step, fp16's overflow only counts towards the limit",
          "[integration][nonfinite]") {
  NonFiniteRig fp32("fp32");
  fp32.bad_step = 1;
  NonFiniteGuard halt({"halt", 20, "fp32"});
  try {
    halt.check(fp32.step(), false);
    FAIL("halt did not stop");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("training stopped at step 1") &&
                        Catch::Contains("gradients are not finite") &&
                        Catch::Contains("head.weight") && Catch::Contains("optim.lr") &&
                        Catch::Contains("checkpoints written so far are kept"));
  }

  // fp16: every step overflows (the loss finite): the scaler backs off each time, halt lets
  // it, and the limit ends the run with the advice to use bf16.
  NonFiniteRig fp16("fp16-mixed");
  fp16.bad_step = 0;
  NonFiniteGuard guard({"halt", 4, "fp16-mixed"});
  for (int i = 0; i < 3; ++i) CHECK(!guard.check(fp16.step(), false).empty());
  const StepStats fourth = fp16.step();
  CHECK(fourth.loss_scale == 65536.0 / 16);
  try {
    guard.check(fourth, false);
    FAIL("the limit did not stop");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("last 4 steps were skipped") &&
                   Catch::Contains("loss scale is down to 4096") &&
                   Catch::Contains("bf16-mixed"));
  }

  // An update that ran during backward cannot be skipped: always a stop.
  NonFiniteGuard skip({"skip", 20, "fp32"});
  StepStats pipelined;
  pipelined.step = 7;
  pipelined.skipped = true;
  CHECK_THROWS_WITH(skip.check(pipelined, true), Catch::Contains("could not be skipped"));
}

TEST_CASE("no checkpoint is written from non-finite parameters, the previous one stays",
          "[integration][nonfinite]") {
  test::TempDir dir("frugal-nonfinite");
  NonFiniteRig rig("fp32");
  Config cfg;
  cfg.train.keep_last = 3;
  CheckpointManager checkpoints(cfg, dir / "checkpoints", *rig.engine, nullptr);
  rig.step();
  checkpoints.save(1, LoaderPosition{});
  const auto first = checkpoints.last();
  REQUIRE(std::filesystem::exists(first));
  // As a pipelined update that applied inf gradients would leave them.
  {
    at::NoGradGuard no_grad;
    rig.model->named_parameters()["head.bias"].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  try {
    checkpoints.save(2, LoaderPosition{});
    FAIL("a checkpoint of NaN parameters was written");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("checkpoint at step 2 not written: the parameters are not finite") &&
                   Catch::Contains(first.string()));
  }
  CHECK(checkpoints.last() == first);
  CHECK(std::filesystem::exists(first));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "checkpoints")) {
    ++entries;
  }
  CHECK(entries == 1);

  // An absurd learning rate is refused before anything runs (in fp32 it would be inf).
  auto r = test::frugal("train --set optim.lr=1e300 --set run.dir=" +
                        test::quote(dir.path().string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("optim.lr") && Catch::Contains("must be <= 1e+06, got 1e+300"));
}
