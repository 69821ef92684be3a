// Sharded checkpoints (zero3 on Gloo): every rank writes its shard; resuming at the same world
// size ends bit for bit where the uninterrupted run ends; resuming at another world size
// (4 -> 2, 2 -> 1, 1 -> 4), under another zero mode, or whole (none, ddp; and a whole
// checkpoint under zero1/2/3) redistributes the state by parameter name, and ends where the
// uninterrupted run ends (1e-5: the summation order differs between world sizes); `frugal
// export` consolidates the shards into one file. hsdp (2 groups of 2) writes its first group's
// shards and every rank's random generators: it resumes itself exactly (dropout on), and
// resumes zero3 checkpoints / is resumed by zero3 by parameter name.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <map>

#include "multiproc.h"
#include "support/model_configs.h"
#include "support/weights.h"

using namespace frugal::test;

namespace {

// A global batch of 8 sequences per step at every world size; constant learning rate, so
// that stopping at step 3 changes nothing; checkpoints every 3 steps.
std::string zero_yaml(const std::string& runs) {
  return "run: {dir: '" + runs + "', seed: 5}\n"
         "model: " + transformer_yaml("gpt", 2, 2, 32, 16, 64) + "\n"
         "data: {type: synthetic, micro_batch_size: 8, synthetic_samples: 256, num_workers: 0}\n"
         "optim: {type: adamw, lr: 0.003, weight_decay: 0.1, clip_grad_norm: 0.5}\n"
         "train: {max_steps: 6, log_every: 1, eval_batches: 0, progress: lines, checkpoint_every: 3}\n"
         "strategy: {sharding: zero3}\n"
         "generate: {tokens: 0}\n";
}

// `frugal train` at `n` ranks with the micro-batch that keeps 8 sequences per step.
CommandResult train(int n, const std::filesystem::path& cfg, const std::string& name,
                    const std::string& extra = "") {
  return launch(n, "train " + quote(cfg.string()) + " --set run.name=" + name +
                       " --set data.micro_batch_size=" + std::to_string(8 / n) + " " + extra);
}

// A scratch folder with zero_yaml in it; each run's step-3 checkpoint and final weights.
struct ZeroRuns {
  TempDir dir;
  std::filesystem::path cfg = dir / "zero.yaml";
  ZeroRuns() { write_text(cfg, zero_yaml(dir.path().string())); }
  std::filesystem::path step3(const std::string& run) const {
    return dir / run / "checkpoints" / "step_00000003";
  }
  std::map<std::string, at::Tensor> final_of(const std::string& run) const {
    return exported_weights(dir / run, dir / (run + ".safetensors"));
  }
};

}  // namespace

TEST_CASE("sharded checkpoints resume exactly, reshard across world sizes and export whole",
          "[multiproc][dist][zero][checkpoint]") {
  const ZeroRuns runs;
  const TempDir& dir = runs.dir;
  const auto& cfg = runs.cfg;
  auto step3 = [&](const std::string& run) { return runs.step3(run); };
  auto final_of = [&](const std::string& run) { return runs.final_of(run); };

  // One scope per resume below (not SECTIONs, which would train the runs again for each).
  // Uninterrupted runs at 4, 2 and 1 ranks; each leaves a sharded checkpoint at step 3.
  for (int n : {4, 2, 1}) {
    CommandResult r = train(n, cfg, "w" + std::to_string(n));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  REQUIRE(std::filesystem::exists(step3("w4") / "shard-00003-of-00004.pt"));
  REQUIRE(std::filesystem::exists(step3("w4") / "meta.json"));
  CHECK_FALSE(std::filesystem::exists(step3("w4") / "optimizer.pt"));
  const auto w4 = final_of("w4"), w2 = final_of("w2"), w1 = final_of("w1");
  // Consolidated, the shards are the whole model: every world size trained the same one.
  CHECK(max_abs_diff(w2, w4) < 1e-5);
  CHECK(max_abs_diff(w1, w4) < 1e-5);
  const auto at3 = exported_weights(step3("w2"), dir / "w2-step3.safetensors");
  CHECK(at3.size() == w2.size());
  CHECK(max_abs_diff(at3, w2) > 1e-4);  // three more steps moved them

  {
    INFO("same world size: exact");
    CommandResult r = train(2, cfg, "r22", "--set run.resume=" + quote(step3("w2").string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(max_abs_diff(final_of("r22"), w2) == 0.0);
  }
  {
    INFO("same world size, offloaded optimizer: exact, from a checkpoint written without");
    CommandResult r = train(2, cfg, "o22", "--set strategy.offload.optimizer=true --set run.resume=" +
                                               quote(step3("w2").string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(max_abs_diff(final_of("o22"), w2) == 0.0);
  }
  {
    INFO("4 -> 2");
    CommandResult r = train(2, cfg, "r42", "--set run.resume=" + quote(step3("w4").string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(max_abs_diff(final_of("r42"), w4) < 1e-5);
  }
  {
    INFO("2 -> 1");
    CommandResult r = train(1, cfg, "r21", "--set run.resume=" + quote(step3("w2").string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(max_abs_diff(final_of("r21"), w2) < 1e-5);
  }
  {
    INFO("1 -> 4");
    CommandResult r = train(4, cfg, "r14", "--set run.resume=" + quote(step3("w1").string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(max_abs_diff(final_of("r14"), w1) < 1e-5);
  }
  {
    INFO("zero3 -> zero1 and zero2 at the same world size");
    for (const std::string mode : {"zero1", "zero2"}) {
      CommandResult r = train(2, cfg, "m" + mode,
                              "--set strategy.sharding.mode=" + mode + " --set run.resume=" +
                                  quote(step3("w2").string()));
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(max_abs_diff(final_of("m" + mode), w2) < 1e-5);
    }
  }
  {
    INFO("zero3 from 4 ranks resumes whole: under ddp at 2 ranks and under none at 1");
    for (const auto& [n, mode] : {std::pair<int, std::string>{2, "ddp"}, {1, "none"}}) {
      CommandResult r = train(n, cfg, "s4" + mode,
                              "--set strategy.sharding.mode=" + mode + " --set run.resume=" +
                                  quote(step3("w4").string()));
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out + r.err, Catch::Contains("written zero3 over 4 ranks under " + mode));
      CHECK(max_abs_diff(final_of("s4" + mode), w4) < 1e-5);
    }
  }
  {
    INFO("a whole checkpoint (ddp, 2 ranks) resumes under zero1 and zero2 at 2 ranks, zero3 at 4");
    CommandResult d = train(2, cfg, "d2", "--set strategy.sharding.mode=ddp");
    INFO(d.out << d.err);
    REQUIRE(d.exit_code == 0);
    REQUIRE(std::filesystem::exists(step3("d2") / "optimizer.pt"));
    const auto d2 = final_of("d2");
    CHECK(max_abs_diff(d2, w2) < 1e-5);  // ddp and zero3 train the same model
    for (const auto& [n, mode] : {std::pair<int, std::string>{2, "zero1"}, {2, "zero2"}, {4, "zero3"}}) {
      CommandResult r = train(n, cfg, "w" + mode,
                              "--set strategy.sharding.mode=" + mode + " --set run.resume=" +
                                  quote(step3("d2").string()));
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out + r.err, Catch::Contains("written whole (none or ddp) under " + mode));
      CHECK(max_abs_diff(final_of("w" + mode), d2) < 1e-5);
    }
  }
  {
    INFO("a different global batch is refused");
    CommandResult r = launch(2, "train " + quote(cfg.string()) +
                                    " --set run.name=big --set data.micro_batch_size=8"
                                    " --set run.resume=" + quote(step3("w2").string()));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.out + r.err, Catch::Contains("global batches of 8 samples, this run's are 16"));
  }
}

TEST_CASE("hsdp checkpoints resume exactly with every rank's generators and across layouts",
          "[multiproc][dist][zero][hsdp][checkpoint]") {
  const ZeroRuns runs;
  const auto& cfg = runs.cfg;
  auto step3 = [&](const std::string& run) { return runs.step3(run); };
  auto final_of = [&](const std::string& run) { return runs.final_of(run); };
  const std::string hsdp = "--set strategy.sharding.mode=hsdp --set strategy.sharding.shard_size=2";
  const std::string dropout = " --set model.dropout=0.1";
  auto run_ok = [&](int n, const std::string& name, const std::string& extra) {
    CommandResult r = train(n, cfg, name, extra);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  {
    INFO("hsdp resumes itself bit for bit, dropout drawing from every rank's own generator");
    run_ok(4, "hd", hsdp + dropout);
    // Four files: the first group's shards (with its generators), the second group's
    // generators alone.
    const auto shard_bytes = [&](int r) {
      return std::filesystem::file_size(step3("hd") / ("shard-0000" + std::to_string(r) + "-of-00004.pt"));
    };
    CHECK(shard_bytes(2) * 20 < shard_bytes(0));
    CHECK(shard_bytes(3) * 20 < shard_bytes(1));
    run_ok(4, "rhd", hsdp + dropout + " --set run.resume=" + quote(step3("hd").string()));
    CHECK(max_abs_diff(final_of("rhd"), final_of("hd")) == 0.0);
  }
  run_ok(2, "z2", "");
  run_ok(4, "h4", hsdp);
  const auto z2 = final_of("z2"), h4 = final_of("h4");
  CHECK(max_abs_diff(h4, z2) < 1e-5);  // hsdp trains zero3's model
  {
    INFO("hsdp over 2 x 2 resumes under zero3 at 2 ranks, by parameter name");
    CommandResult r = run_ok(2, "hz", "--set run.resume=" + quote(step3("h4").string()));
    CHECK_THAT(r.out + r.err, Catch::Contains("written hsdp over 2 ranks x 2 replicas under zero3"));
    CHECK(max_abs_diff(final_of("hz"), h4) < 1e-5);
  }
  {
    INFO("zero3 at 2 ranks resumes under hsdp over 2 x 2");
    CommandResult r = run_ok(4, "zh", hsdp + " --set run.resume=" + quote(step3("z2").string()));
    CHECK_THAT(r.out + r.err, Catch::Contains("written zero3 over 2 ranks under hsdp"));
    CHECK(max_abs_diff(final_of("zh"), z2) < 1e-5);
  }
}
