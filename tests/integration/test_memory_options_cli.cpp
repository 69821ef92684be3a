// The memory options past PyTorch's floor, driven from YAML through `frugal train`: with
// optim.in_backward and with strategy.offload.activations (with and without checkpointing)
// the losses and the final weights equal the plain run's exactly; with model.loss_chunk_tokens
// the losses stay within 1e-5 of it.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/io/safetensors.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

std::vector<double> losses_of(const std::filesystem::path& metrics) {
  std::vector<double> out;
  std::istringstream lines(test::read_text(metrics));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss") && j.contains("step")) out.push_back(j.at("loss").get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("optim.in_backward and model.loss_chunk_tokens from YAML train as the plain run",
          "[integration][cli][memory_options]") {
  test::TempDir dir("frugal-memory-options");
  const auto cfg = dir / "gpt.yaml";
  test::write_text(cfg, "run: {dir: '" + dir.path().string() + "', seed: 5}\n"
                        "model: " + test::transformer_yaml("gpt", 2, 2, 32, 32, 256) + "\n"
                        "data: {type: synthetic, micro_batch_size: 4, synthetic_samples: 128, "
                        "num_workers: 0}\n"
                        "optim: {type: adamw, lr: 0.003, weight_decay: 0.1}\n"
                        "train: {max_steps: 6, log_every: 1, eval_batches: 0, progress: none, "
                        "checkpoint_every: 0}\n"
                        "generate: {tokens: 0}\n");
  auto train = [&](const std::string& name, const std::string& sets) {
    auto r = test::run_command(test::frugal_binary() + " train " + test::quote(cfg.string()) +
                               " --set run.name=" + name + sets, 120);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto e = test::run_command(test::frugal_binary() + " export " +
                               test::quote((dir / name).string()) + " --format safetensors -o " +
                               test::quote((dir / (name + ".safetensors")).string()));
    REQUIRE(e.exit_code == 0);
    return losses_of(dir / name / "metrics.jsonl");
  };
  auto same_weights = [&](const std::string& x, const std::string& y) {
    const auto a = io::read_safetensors(dir / (x + ".safetensors"));
    const auto b = io::read_safetensors(dir / (y + ".safetensors"));
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(y << ": " << a[i].first);
      CHECK(a[i].first == b[i].first);
      CHECK(at::equal(a[i].second, b[i].second));
    }
  };
  const auto plain = train("plain", "");
  const auto early = train("early", " --set optim.in_backward=true");
  const auto chunked = train("chunked", " --set model.loss_chunk_tokens=20");
  const auto act_ckpt = train("act_ckpt", " --set strategy.offload.activations=true"
                                          " --set strategy.checkpointing=full");
  const auto act_saved = train("act_saved", " --set strategy.offload.activations=true"
                                            " --set strategy.offload.activation_prefetch=2");
  REQUIRE(plain.size() == 6);
  CHECK(early == plain);
  same_weights("plain", "early");
  CHECK(act_ckpt == plain);
  same_weights("plain", "act_ckpt");
  CHECK(act_saved == plain);
  same_weights("plain", "act_saved");
  // The host copies' peak per step in metrics.jsonl: with checkpointing the two blocks'
  // inputs, (4, 32, 32) floats each.
  std::istringstream lines(test::read_text(dir / "act_ckpt" / "metrics.jsonl"));
  std::string first;
  std::getline(lines, first);
  CHECK(nlohmann::json::parse(first).value("offload_activations_host_peak_bytes", -1) ==
        2 * 4 * 32 * 32 * 4);
  REQUIRE(chunked.size() == 6);
  for (size_t i = 0; i < plain.size(); ++i) CHECK(std::abs(chunked[i] - plain[i]) < 1e-5);
}

TEST_CASE("strategy.checkpointing.policy auto from YAML: the chosen policy is recorded and the "
          "run's peak stays under the budget",
          "[integration][cli][memory_options][auto_policy]") {
  test::TempDir dir("frugal-auto-policy");
  // memory.budget is the tracking allocator's hard limit on the CPU: a step past it fails.
  const std::string budget = "170MiB";
  auto r = test::run_command(
      test::frugal_binary() + " train " + test::quote((test::source_dir() / "configs/default.yaml").string()) +
          " --set run.dir=" + test::quote(dir.path().string()) + " --set run.name=auto" +
          " --set run.device=cpu --set data.type=synthetic --set data.synthetic_samples=512" +
          " --set strategy.checkpointing.policy=auto --set memory.budget=" + budget +
          " --set train.max_steps=3 --set train.log_every=1 --set train.eval_batches=0"
          " --set train.progress=none --set generate.tokens=0",
      300);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK((r.out + r.err).find("strategy.checkpointing auto: selective (attn)") != std::string::npos);
  const std::string resolved = test::read_text(dir / "auto" / "config.resolved.yaml");
  CHECK(resolved.find("policy: \"selective\"") != std::string::npos);
  int64_t peak = 0;
  std::istringstream lines(test::read_text(dir / "auto" / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("mem_allocated_peak_bytes")) peak = std::max(peak, j.at("mem_allocated_peak_bytes").get<int64_t>());
  }
  CHECK(peak > 0);
  CHECK(peak <= (int64_t{170} << 20));
}
