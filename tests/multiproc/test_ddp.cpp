// DDP at 1, 2 and 4 ranks on Gloo: with and without accumulation and checkpointing, the
// parameters after N steps equal those of one process training on the same global batch
// (fp32; 1e-5 absolute: only the order of summation differs); the same job under frugal
// launch, mpirun and torchrun ends with the same parameters, bit for bit.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <map>

#include "multiproc.h"
#include "support/model_configs.h"
#include "support/weights.h"

using namespace frugal::test;

namespace {

// A tiny GPT, dropout off (each rank draws its own masks, one process draws others), global
// batch 8 sequences per step.
std::string ddp_yaml(const std::string& runs) {
  return "run: {dir: '" + runs + "', seed: 3}\n"
         "model: " + transformer_yaml("gpt", 2, 2, 32, 16, 64) + "\n"
         "data: {type: synthetic, micro_batch_size: 8, synthetic_samples: 256, num_workers: 0}\n"
         "optim: {type: adamw, lr: 0.003}\n"
         "train: {max_steps: 6, log_every: 1, eval_batches: 0, progress: lines, checkpoint_every: 0}\n"
         "generate: {tokens: 0}\n";
}

// The weights a run named `name` under `runs` ended with.
std::map<std::string, at::Tensor> final_params(const std::filesystem::path& runs,
                                               const std::string& name) {
  return exported_weights(runs / name, runs / (name + ".safetensors"));
}

}  // namespace

TEST_CASE("ddp buckets start during backward, skip early micro-steps and sum over ranks",
          "[multiproc][dist][ddp]") {
  for (int n : {2, 4}) {
    SECTION("world " + std::to_string(n)) {
      CommandResult r = launch(n, quote(dist_worker()) + " ddp");
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      auto j = rank0_report(r.out);
      CHECK(j.at("launched_during_backward") == j.at("buckets"));
      CHECK(j.at("offload_pipelined") == 6);  // every parameter of the 3-layer MLP
    }
  }
}

TEST_CASE("ddp at world 1, 2 and 4 equals one process on the same global batch",
          "[multiproc][dist][ddp]") {
  TempDir dir;
  const auto cfg = dir / "ddp.yaml";
  write_text(cfg, ddp_yaml(dir.path().string()));
  CommandResult ref = frugal::test::frugal("train " + quote(cfg.string()) + " --set run.name=reference");
  REQUIRE(ref.exit_code == 0);
  const auto reference = final_params(dir.path(), "reference");
  struct Variant {
    const char* name;
    int accumulation;
    const char* checkpointing;
  };
  for (int n : {1, 2, 4}) {
    for (Variant v : {Variant{"plain", 1, "none"}, Variant{"accumulation", 2, "none"},
                      Variant{"checkpointing", 1, "full"}}) {
      const std::string name = "w" + std::to_string(n) + "-" + v.name;
      SECTION(name) {
        const int micro = 8 / (n * v.accumulation);
        CommandResult r = launch(
            n, "train " + quote(cfg.string()) + " --set run.name=" + name +
                   " --set strategy.sharding.mode=ddp --set data.micro_batch_size=" +
                   std::to_string(micro) + " --set strategy.accumulation=" +
                   std::to_string(v.accumulation) + " --set strategy.checkpointing=" +
                   v.checkpointing);
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(max_abs_diff(final_params(dir.path(), name), reference) < 1e-5);
      }
    }
  }
}

TEST_CASE("the same ddp job under frugal launch, mpirun and torchrun ends the same",
          "[multiproc][dist][ddp]") {
  TempDir dir;
  const auto cfg = dir / "ddp.yaml";
  write_text(cfg, ddp_yaml(dir.path().string()));
  const std::string job = " train " + quote(cfg.string()) +
                          " --set strategy.sharding.mode=ddp --set data.micro_batch_size=4";
  CommandResult a = launch(2, job + " --set run.name=launch");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  // mpirun: ranks from OMPI_COMM_WORLD_*, MASTER_ADDR defaulting to 127.0.0.1.
  CommandResult b = run_command(
      "mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_PORT=" +
          std::to_string(free_port()) + " " +
          quote(frugal_binary()) + job + " --set run.name=mpirun",
      120);
  INFO(b.out << b.err);
  REQUIRE(b.exit_code == 0);
  // torchrun --no-python: its agent serves the store (TORCHELASTIC_USE_AGENT_STORE).
  CommandResult c = run_command(quote((std::filesystem::path(python()).parent_path() / "torchrun").string()) +
                                    " --standalone --nproc-per-node 2 --no-python " +
                                    quote(frugal_binary()) + job + " --set run.name=torchrun",
                                120);
  INFO(c.out << c.err);
  REQUIRE(c.exit_code == 0);
  const auto launched = final_params(dir.path(), "launch");
  CHECK(max_abs_diff(final_params(dir.path(), "mpirun"), launched) == 0.0);
  CHECK(max_abs_diff(final_params(dir.path(), "torchrun"), launched) == 0.0);
}

TEST_CASE("rank 0's metrics carry every rank's step time and memory, ranks can log their own",
          "[multiproc][dist][ddp]") {
  TempDir dir;
  const auto cfg = dir / "ddp.yaml";
  write_text(cfg, ddp_yaml(dir.path().string()));
  CommandResult r = launch(2, "train " + quote(cfg.string()) +
                                  " --set run.name=m --set strategy.sharding=ddp"
                                  " --set data.micro_batch_size=4 --set train.metrics_per_rank=true");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto records = [](const std::filesystem::path& file) {
    std::vector<nlohmann::json> out;
    std::istringstream lines(read_text(file));
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) out.push_back(j);
    }
    return out;
  };
  const auto job = records(dir / "m" / "metrics.jsonl");
  REQUIRE(job.size() == 6);
  for (const auto& j : job) {
    CHECK(j.at("rank_step_time_s").size() == 2);
    CHECK(j.at("rank_mem_allocated_peak_bytes").size() == 2);
    CHECK(j.at("rank_mem_allocated_peak_bytes")[1].get<int64_t>() > 0);
  }
  // Traffic per step at 2 ranks (ring factor 2 (N-1)/N = 1): the fp32 gradients once, plus
  // the two fp64 scalars (target count, loss); the gathering of these figures is not counted.
  int64_t psi = 0;
  for (const auto& [name, t] : final_params(dir.path(), "m")) psi += t.numel();
  CHECK(job.back().at("comm_sent_bytes_per_step").get<int64_t>() == 4 * psi + 16);
  for (int rank : {0, 1}) {
    const auto own = records(dir / "m" / ("metrics.rank" + std::to_string(rank) + ".jsonl"));
    REQUIRE(own.size() == 6);
    // The same global loss everywhere; this rank's own step time.
    CHECK(own.back().at("loss") == job.back().at("loss"));
    CHECK(own.back().at("step_time_s") == job.back().at("rank_step_time_s")[rank]);
  }
}
