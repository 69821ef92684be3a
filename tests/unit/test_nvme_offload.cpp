// Optimizer state on disk (strategy.offload.optimizer: nvme): the masters and the optimizer
// state stream through a ring of host buffers from a scratch file, and training is bit for bit
// RAM offload's, for AdamW, 8-bit AdamW and Adafactor, with accumulation and bf16-mixed. Host
// memory stays at the model, its gradients and the ring while the state is many times that
// (RAM offload fails under the same budget); the directory's faults are one-line errors.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "frugal/engine/engine.h"
#include "frugal/io/checkpoint.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"
#include "frugal/optim/param_state.h"
#include "frugal/strategy/nvme_offload.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

namespace test_nvme_offload {

struct Trained {
  std::vector<at::Tensor> params;
  std::vector<double> losses;
  int64_t records = 0, entries = 0, parameters = 0, file_bytes = 0, ring_bytes = 0, state_bytes = 0;
};

GptOptions model_options(int64_t width, int64_t layers) {
  return GptOptions::sized(64, 16, layers, 2, width);
}

// read_state: what a checkpoint would save, read back; save_dir: a checkpoint written there.
Trained train(StrategyConfig sc, const OptimConfig& oc, int64_t steps, int64_t width = 32,
              int64_t layers = 2, bool read_state = true,
              const std::filesystem::path& save_dir = {}) {
  at::manual_seed(4);
  auto model = std::make_shared<Gpt>(model_options(width, layers));
  Engine engine(EngineOptions{sc, 0.5});
  engine.setup(model, make_optimizer(oc, *model));
  Trained out;
  at::manual_seed(5);
  for (int64_t s = 0; s < steps; ++s) {
    Batch b{at::randint(0, 64, {4, 16}, at::kLong), at::randint(0, 64, {4, 16}, at::kLong)};
    out.losses.push_back(
        engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); })
            .loss);
  }
  for (const auto& p : model->parameters()) out.params.push_back(p.detach().clone());
  if (const auto* nvme = dynamic_cast<const NvmeOptimizerOffload*>(engine.update())) {
    out.records = nvme->records();
    out.entries = nvme->entries();
    out.parameters = static_cast<int64_t>(model->parameters().size());
    out.file_bytes = nvme->file_bytes();
    out.ring_bytes = nvme->host_buffer_bytes();
  }
  if (!save_dir.empty()) {
    StateDict state = engine.state_dict();
    Checkpoint ckpt;
    ckpt.step = steps;
    ckpt.model = std::move(state.model);
    ckpt.optimizer = std::move(state.optimizer);
    ckpt.state = std::move(state.state);
    save_checkpoint(save_dir, ckpt, 0);
  }
  if (!read_state) return out;
  // The state a checkpoint would save, read back from the file.
  const StateDict saved = engine.state_dict();
  for (const auto& [name, t] : saved.optimizer) {
    if (name.size() < 5 || name.substr(name.size() - 5) != "/step") {
      out.state_bytes += static_cast<int64_t>(t.nbytes());
    }
  }
  return out;
}

void require_equal(const Trained& a, const Trained& b) {
  CHECK(a.losses == b.losses);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) CHECK(at::equal(a.params[i], b.params[i]));
}

// An environment variable set for the scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};


TEST_CASE("optimizer state on disk trains exactly as RAM offload", "[unit][offload][nvme]") {
  frugal::test::TempDir dir;
  struct Variant {
    const char* name;
    const char* optim;
    const char* precision;
    int64_t accumulation;
    const char* backend;
  };
  for (Variant v : {Variant{"adamw", "adamw", "fp32", 1, "io_uring"},
                    Variant{"adamw threads backend", "adamw", "fp32", 1, "threads"},
                    Variant{"adamw8bit accumulation", "adamw8bit", "fp32", 2, "io_uring"},
                    Variant{"adafactor bf16-mixed", "adafactor", "bf16-mixed", 1, "io_uring"}}) {
    SECTION(v.name) {
      OptimConfig oc;
      oc.type = v.optim;
      oc.lr = 3e-3;
      oc.weight_decay = 0.1;
      oc.quant_block = 64;
      StrategyConfig sc;
      sc.precision = v.precision;
      sc.accumulation = v.accumulation;
      sc.offload.optimizer = true;
      const Trained ram = train(sc, oc, 5);
      sc.offload.optimizer = OptimizerPlace::nvme;
      sc.offload.nvme_path = dir.path().string();
      sc.offload.buffer_mb = 0.05;  // a ring of ~51 KiB: the state streams in many records
      ScopedEnv backend("FRUGAL_IO_BACKEND", v.backend);
      const Trained nvme = train(sc, oc, 5);
      require_equal(nvme, ram);
      CHECK(nvme.records > 3);
      // AdamW's element-wise state lets a parameter larger than a ring slot go in pieces.
      if (std::string(v.optim) == "adamw") CHECK(nvme.entries > nvme.parameters);
      // The state a save reads back from the file is RAM offload's.
      CHECK(nvme.state_bytes == ram.state_bytes);
      CHECK(nvme.state_bytes > 0);
      // The scratch file is unlinked: nothing is left in the directory.
      CHECK(std::filesystem::is_empty(dir.path()));
    }
  }
}

TEST_CASE("with the optimizer state on disk host memory stays at the model and the ring",
          "[unit][offload][nvme]") {
  frugal::test::TempDir dir;
  memory::install_cpu_tracking();
  OptimConfig oc;
  oc.type = "adamw";
  oc.lr = 1e-3;
  StrategyConfig sc;
  sc.offload.optimizer = OptimizerPlace::nvme;
  sc.offload.nvme_path = dir.path().string();
  sc.offload.buffer_mb = 3;
  // Many small parameters (12 blocks of width 128), so that the ring holds several of them.
  constexpr int64_t kWidth = 128, kLayers = 12;
  at::manual_seed(4);
  const int64_t params = [] {
    int64_t n = 0;
    for (const auto& p : Gpt(model_options(kWidth, kLayers)).parameters()) n += p.numel();
    return n;
  }();
  const int64_t param_bytes = params * 4;
  // Masters and two moments: three times the model, 12 bytes per parameter.
  const int64_t state_bytes = 3 * param_bytes;
  // The budget: the model and its gradients, plus room for the ring (3 MiB), one record's
  // gradients and the activations; the state is at least 4x that room.
  const int64_t room = int64_t{6} << 20;
  const int64_t budget = 2 * param_bytes + room;
  INFO(fmt::format("params {}, state {} bytes, budget {} bytes", params, state_bytes, budget));
  REQUIRE(state_bytes >= 4 * room);
  memory::set_cpu_budget(budget);
  struct Unset {
    ~Unset() { memory::set_cpu_budget(0); }
  } unset;
  memory::reset_cpu_peak();
  const int64_t before = memory::cpu_counters().current_bytes;
  // Training, then a checkpoint of everything: the save maps the state from the scratch file
  // and streams it out, so it stays within the budget too.
  frugal::test::TempDir ckpts;
  Trained nvme = train(sc, oc, 3, kWidth, kLayers, /*read_state=*/false, ckpts.path());
  const int64_t peak = memory::cpu_counters().peak_bytes - before;
  INFO("peak " << peak);
  CHECK(peak <= budget);
  memory::set_cpu_budget(0);
  const Checkpoint back = load_checkpoint(checkpoint_path(ckpts.path(), 3));
  int64_t saved_state = 0;
  for (const auto& [name, t] : back.optimizer) {
    if (name.size() < 5 || name.substr(name.size() - 5) != "/step") saved_state += t.nbytes();
  }
  // Both moments in full (fp32 training: the masters are the parameters, saved as the model).
  CHECK(saved_state == 2 * param_bytes);
  CHECK(back.model.size() == Gpt(model_options(kWidth, kLayers)).named_parameters().size());
  memory::set_cpu_budget(budget);
  CHECK(nvme.file_bytes >= state_bytes);
  CHECK(nvme.ring_bytes <= (int64_t{7} << 20) / 2);
  // RAM offload keeps the same state in host memory: over the same budget.
  sc.offload.optimizer = true;
  CHECK_THROWS_WITH(train(sc, oc, 3, kWidth, kLayers, false),
                    Catch::Contains("CPU memory budget exceeded"));
}

TEST_CASE("the optimizer state directory's faults are one-line errors", "[unit][offload][nvme]") {
  frugal::test::TempDir dir;
  OptimConfig oc;
  StrategyConfig sc;
  sc.offload.optimizer = OptimizerPlace::nvme;
  sc.offload.buffer_mb = 0.05;
  SECTION("a missing directory") {
    sc.offload.nvme_path = (dir.path() / "absent").string();
    CHECK_THROWS_WITH(train(sc, oc, 1),
                      Catch::Contains("strategy.offload.nvme_path") && Catch::Contains("absent") &&
                          Catch::Contains("is not a directory"));
  }
  SECTION("a directory that cannot be written") {
    // /proc takes no new files, even from root.
    sc.offload.nvme_path = "/proc";
    CHECK_THROWS_WITH(train(sc, oc, 1), Catch::Contains("strategy.offload.nvme_path") &&
                                            Catch::Contains("cannot open for writing"));
  }
  SECTION("a filesystem without O_DIRECT falls back, or refuses when asked") {
    sc.offload.nvme_path = dir.path().string();
    ScopedEnv no_direct("FRUGAL_FAULT_NO_ODIRECT", "1");
    StrategyConfig ram = sc;
    ram.offload.optimizer = true;
    require_equal(train(sc, oc, 2), train(ram, oc, 2));
    sc.offload.nvme_require_direct = true;
    CHECK_THROWS_WITH(train(sc, oc, 1), Catch::Contains("strategy.offload.nvme_path") &&
                                            Catch::Contains("O_DIRECT"));
  }
  SECTION("the disk filling mid-run") {
    sc.offload.nvme_path = dir.path().string();
    ScopedEnv full("FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES", "200000");
    CHECK_THROWS_WITH(train(sc, oc, 4), Catch::Contains("No space left on device") &&
                                            Catch::Contains("frugal-optimizer-state"));
  }
}

}  // namespace test_nvme_offload
