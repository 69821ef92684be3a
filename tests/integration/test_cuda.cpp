// The CUDA path of the memory strategies: fp16-mixed with the GradScaler, bf16-mixed, CUDA
// memory statistics and a whole `frugal train` run on the GPU. Tagged [cuda]; on a machine
// without CUDA each case is reported as skipped (support/skip.h), and tools/gpu/check.sh runs
// them on the GPU machine. (Checkpointing's CUDA case lives with the other checkpointing tests.)
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include "frugal/config/load.h"
#include "frugal/engine/device.h"
#include "frugal/engine/engine.h"
#include "frugal/io/checkpoint.h"
#include "frugal/memory/stats.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/grad_scaler.h"
#include "frugal/train/trainer.h"
#include "support/helpers.h"
#include "support/model_configs.h"
#include "support/skip.h"

using namespace frugal;

TEST_CASE("run.device resolves against what the process sees", "[integration][cuda]") {
  CHECK(resolve_device("cpu") == c10::Device(c10::kCPU));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda0", "cuda:-1", "cuda:1234567890"}) {
    CHECK_THROWS_WITH(resolve_device(bad),
                      "run.device: unknown device '" + std::string(bad) +
                          "' (expected auto, cpu, cuda or cuda:N)");
  }
  if (!at::hasCUDA()) {
    CHECK(resolve_device("auto") == c10::Device(c10::kCPU));
    CHECK_THROWS_WITH(resolve_device("cuda"),
                      "run.device: 'cuda' asked for, but this process sees no CUDA device (use "
                      "auto or cpu)");
    return;
  }
  CHECK(resolve_device("auto") == c10::Device(c10::kCUDA, 0));
  CHECK(resolve_device("cuda") == c10::Device(c10::kCUDA, 0));
  CHECK_THROWS_WITH(resolve_device("cuda:999"),
                    Catch::Contains("run.device: 'cuda:999' asked for, but this process sees") &&
                        Catch::Contains("CUDA device(s)"));
}

namespace {

bool no_cuda() { return test::skip_without_cuda(); }

const c10::Device kCuda(c10::kCUDA, 0);

// A learnable batch: next token = (token + 1) mod vocab.
Batch counting_batch(int64_t B, int64_t T, int64_t V) {
  at::Tensor start = at::randint(0, V, {B, 1}, at::kLong);
  at::Tensor seq = (start + at::arange(T + 1, at::kLong)).remainder(V);  // (B, T+1)
  return Batch{seq.slice(1, 0, T), seq.slice(1, 1, T + 1)};
}

struct Trajectory {
  std::vector<double> losses, scales;
  std::vector<bool> skipped;
};

// A tiny GPT on CUDA; at step `poison_step` the loss is multiplied by inf, so every gradient
// overflows (fp16's scaler must skip that step and back off).
Trajectory train_on_cuda(const std::string& precision, int steps, int poison_step = -1) {
  at::manual_seed(5);
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
  model->to(kCuda);
  OptimConfig oc;
  oc.lr = 3e-3;
  StrategyConfig sc;
  sc.precision = precision;
  sc.accumulation = 2;
  sc.grad_scaler.growth_interval = 5;
  Engine engine(EngineOptions{sc, 1.0});
  engine.setup(model, make_optimizer(oc, *model));
  at::manual_seed(6);
  Trajectory t;
  for (int i = 0; i < steps; ++i) {
    const double factor = i == poison_step ? INFINITY : 1.0;
    StepStats st = engine.step(counting_batch(8, 16, 32).to(kCuda), [&](const Batch& mb) {
      return model->loss_sum(model->forward(mb.x), mb.y) * factor;
    });
    t.losses.push_back(st.loss);
    t.scales.push_back(st.loss_scale);
    t.skipped.push_back(st.skipped);
  }
  return t;
}

double tail_mean(const std::vector<double>& v) {
  double s = 0;
  for (size_t i = v.size() - 10; i < v.size(); ++i) s += v[i];
  return s / 10;
}

}  // namespace

TEST_CASE("on CUDA, bf16-mixed and fp16-mixed end within tolerance of fp32", "[integration][cuda]") {
  if (no_cuda()) return;
  const int steps = 40;
  const auto fp32 = train_on_cuda("fp32", steps);
  const auto bf16 = train_on_cuda("bf16-mixed", steps);
  auto fp16 = train_on_cuda("fp16-mixed", steps);
  // On CUDA the first scaled gradients (loss sum x 65536) overflow fp16: the scaler skips
  // those steps and backs off, as torch.amp.GradScaler does on the same run (tools/gpu/check.sh's
  // fp16 row compares the two). A few skips, then fp16 trains as many applied steps as fp32.
  const auto skipped = std::count(fp16.skipped.begin(), fp16.skipped.end(), true);
  CHECK(skipped <= 4);
  if (skipped > 0) fp16 = train_on_cuda("fp16-mixed", steps + static_cast<int>(skipped));
  std::vector<double> fp16_applied;
  for (size_t i = 0; i < fp16.losses.size(); ++i) {
    if (!fp16.skipped[i]) fp16_applied.push_back(fp16.losses[i]);
  }
  REQUIRE(fp16_applied.size() >= static_cast<size_t>(steps));
  const std::string tails = fmt::format("tail losses: fp32 {} bf16 {} fp16 {} ({} skipped)",
                                        tail_mean(fp32.losses), tail_mean(bf16.losses),
                                        tail_mean(fp16_applied), skipped);
  std::cout << tails << "\n";
  INFO(tails);
  CHECK(fp32.losses.back() < 0.5 * fp32.losses.front());
  // The same tolerances as on CPU (tests/integration/test_precision.cpp).
  CHECK(std::abs(tail_mean(bf16.losses) - tail_mean(fp32.losses)) < 0.10 * tail_mean(fp32.losses));
  CHECK(std::abs(tail_mean(fp16_applied) - tail_mean(fp32.losses)) <
        0.05 * tail_mean(fp32.losses));
}

TEST_CASE("on CUDA, fp16-mixed skips an overflowing step, backs off and grows again",
          "[integration][cuda]") {
  if (no_cuda()) return;
  const auto t = train_on_cuda("fp16-mixed", 12, /*poison_step=*/3);
  // growth_interval 5: steps 0-2 are clean (no growth yet), 3 overflows -> skipped, 65536 / 2;
  // then 5 clean steps (4..8) grow it back to 65536 at step 8.
  for (int i = 0; i < 12; ++i) CHECK(t.skipped[i] == (i == 3));
  CHECK(t.scales[2] == 65536.0);
  CHECK(t.scales[3] == 32768.0);
  CHECK(t.scales[7] == 32768.0);
  CHECK(t.scales[8] == 65536.0);
}

TEST_CASE("on CUDA, the GradScaler follows the same trajectory as on CPU", "[integration][cuda]") {
  if (no_cuda()) return;
  GradScalerOptions o;
  o.growth_interval = 3;
  GradScaler cpu(o), gpu(o);
  at::manual_seed(3);
  for (int step = 0; step < 20; ++step) {
    at::Tensor g = at::randn({64});
    if (step % 7 == 4) g[5] = (step % 2) ? INFINITY : NAN;  // planted overflow
    at::Tensor pc = at::zeros({64}).requires_grad_(true);
    at::Tensor pg = at::zeros({64}, at::TensorOptions(kCuda)).requires_grad_(true);
    pc.mutable_grad() = g * cpu.get_scale();
    pg.mutable_grad() = g.to(kCuda) * gpu.get_scale();
    const bool inf_c = cpu.unscale({pc});
    const bool inf_g = gpu.unscale({pg});
    REQUIRE(inf_c == inf_g);
    if (!inf_c) CHECK(at::allclose(pc.grad(), pg.grad().cpu(), 0, 0));
    cpu.update();
    gpu.update();
    REQUIRE(cpu.get_scale() == gpu.get_scale());
    REQUIRE(cpu.growth_tracker() == gpu.growth_tracker());
  }
}

TEST_CASE("CUDA memory statistics count allocations, peaks and the cache", "[integration][cuda]") {
  if (no_cuda()) return;
  memory::empty_cache(kCuda);
  memory::reset_peaks(kCuda);
  const memory::MemorySnapshot before = memory::snapshot(kCuda);
  const int64_t bytes = 64 << 20;
  {
    at::Tensor t = at::empty({bytes}, at::TensorOptions(kCuda).dtype(at::kByte));
    const memory::MemorySnapshot during = memory::snapshot(kCuda);
    CHECK(during.allocated - before.allocated == bytes);
    CHECK(during.active - before.active == bytes);
    CHECK(during.reserved >= during.allocated);
    CHECK(during.allocated_peak >= during.allocated);
  }
  const memory::MemorySnapshot after = memory::snapshot(kCuda);
  CHECK(after.allocated == before.allocated);
  CHECK(after.allocated_peak - before.allocated >= bytes);  // the peak remembers
  CHECK(after.reserved - before.reserved >= bytes);         // the block stays cached...
  memory::empty_cache(kCuda);
  CHECK(memory::snapshot(kCuda).reserved < after.reserved);  // ...until empty_cache
  memory::reset_peaks(kCuda);
  CHECK(memory::snapshot(kCuda).allocated_peak == memory::snapshot(kCuda).allocated);
  CHECK(after.device == "cuda:0");
  CHECK(after.tracked);
}

TEST_CASE("frugal train on CUDA: bf16 + checkpointing, CUDA memory in metrics, exact resume",
          "[integration][cuda]") {
  if (no_cuda()) return;
  test::TempDir dir;
  auto config = [&](const std::string& name, int64_t steps) {
    Config cfg = load_config_string(R"(
run: {dir: ., device: cuda, seed: 3}
model: )" + test::transformer_yaml("gpt", 2, 2, 32, 32, 64, "dropout: 0.1") + R"(
data: {type: synthetic, micro_batch_size: 8, synthetic_samples: 256, num_workers: 0}
strategy: {precision: bf16-mixed, checkpointing: {policy: full}}
train: {log_every: 1, eval_batches: 0, progress: none, checkpoint_every: 3}
generate: {tokens: 0}
)",
                                    "cuda.yaml");
    cfg.run.dir = dir.path().string();
    cfg.run.name = name;
    cfg.train.max_steps = steps;
    return cfg;
  };
  TrainResult full = Trainer(config("full", 6)).run();
  std::ifstream metrics(full.run_dir / "metrics.jsonl");
  std::string line;
  int records = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    ++records;
    CHECK(j.at("mem_allocated_bytes").get<int64_t>() > 0);
    CHECK(j.at("mem_reserved_peak_bytes").get<int64_t>() >= j.at("mem_allocated_peak_bytes").get<int64_t>());
    CHECK(j.contains("mem_active_peak_bytes"));
  }
  CHECK(records == 6);
  // Resume from the step-3 checkpoint onto CUDA (optimizer state is mapped to the device).
  Config again = config("full", 6);
  again.run.name = "resumed";
  const auto saved = list_checkpoints(full.run_dir / "checkpoints");  // steps 3 and 6
  REQUIRE(saved.size() == 2);
  again.run.resume = saved.front().string();
  TrainResult resumed = Trainer(again).run();
  CHECK(resumed.resumed_from == 3);
  // Not bit for bit: cuBLAS and SDPA may pick different kernels run to run on the GPU.
  CHECK(std::abs(resumed.last_loss - full.last_loss) < 1e-3 * std::abs(full.last_loss));
}

TEST_CASE("NCCL at world 1: collectives and DDP / ZeRO steps on the GPU", "[integration][cuda][dist]") {
  if (no_cuda()) return;
  DistributedConfig dc;
  dc.backend = "auto";  // NCCL where CUDA is
  dist::RankInfo one;   // rank 0 of 1
  auto comm = dist::init_from_env(dc, one);
  CHECK(comm->backend() == "nccl");
  CHECK(comm->device() == kCuda);
  at::Tensor t = at::full({1024}, 3.0, at::TensorOptions(kCuda));
  comm->all_reduce(t);
  CHECK(t.sum().item<double>() == 3.0 * 1024);
  at::Tensor out = at::empty({1024}, t.options());
  comm->all_gather(out, t);
  CHECK(at::equal(out, t));
  // A DDP step and zero1/2/3 steps through the engine equal the same step without sharding
  // (zero3: the units' storage is freed and refilled on the GPU, gathered by NCCL).
  auto step = [&](const std::string& mode) {
    at::manual_seed(7);
    auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
    model->to(kCuda);
    StrategyConfig sc;
    sc.sharding.mode = mode;
    Engine engine(EngineOptions{sc, 1.0}, mode == "none" ? nullptr : comm);
    OptimConfig oc;
    engine.setup(model, make_optimizer(oc, *model));
    at::manual_seed(8);
    engine.step(counting_batch(8, 16, 32).to(kCuda),
                [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
    FullParameters full(engine.sharding());
    return model->parameters().front().detach().cpu();
  };
  const at::Tensor plain = step("none");
  for (const char* mode : {"ddp", "zero1", "zero2", "zero3"}) {
    INFO(mode);
    CHECK(at::allclose(step(mode), plain, 0, 1e-6));
  }
}

TEST_CASE("on CUDA, optimizer offload (side-stream copies, host step) matches the device step",
          "[integration][cuda][offload]") {
  if (no_cuda()) return;
  // The device run steps with ATen's CUDA kernel, the offloaded one with the CPU kernel on the
  // host masters: equal within float rounding, with and without the pipelined step.
  auto run = [&](bool offload, double clip) {
    at::manual_seed(7);
    auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
    model->to(kCuda);
    StrategyConfig sc;
    sc.offload.optimizer = offload;
    Engine engine(EngineOptions{sc, clip});
    OptimConfig oc;
    oc.lr = 3e-3;
    engine.setup(model, make_optimizer(oc, *model));
    at::manual_seed(8);
    for (int s = 0; s < 3; ++s) {
      engine.step(counting_batch(8, 16, 32).to(kCuda),
                  [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
    }
    std::vector<at::Tensor> out;
    for (const auto& p : model->parameters()) out.push_back(p.detach().cpu());
    return out;
  };
  // Not bit-exact: the CPU's AdamW rounds differently from CUDA's kernels, and three steps
  // carry the difference into the next gradients (the check's 20-step row: 4.8e-6 on an H200).
  // A wrong step (a stale gradient, a missed clip) is off by about the learning rate, 3e-3.
  for (double clip : {1.0, 0.0}) {
    const auto device = run(false, clip), host = run(true, clip);
    double worst = 0;
    for (size_t i = 0; i < device.size(); ++i) {
      worst = std::max(worst, (host[i] - device[i]).abs().max().item<double>());
    }
    std::cout << "offload on CUDA, clip " << clip << ": max abs diff " << worst << "\n";
    INFO("clip " << clip << ": max abs diff " << worst);
    CHECK(worst <= 1e-5);
  }
}
