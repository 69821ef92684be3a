// Throughput and MFU: the models' FLOPs per token follow PaLM's count (6N + 12 L C T, N the
// parameters a token's matmuls read: not GPT's position table, not an untied Llama's input
// embedding), checked against shapes counted here; a run with train.peak_flops writes
// model_flops_per_token, achieved_flops and mfu into metrics.jsonl consistent with its own
// step time, and the progress line shows the MFU.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/models/registry.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

TEST_CASE("FLOPs per token: 6N + 12 L C T for the GPT and the Llama", "[integration][mfu]") {
  ModelConfig gpt = test::transformer_config("gpt", 3, 2, 32, 64, 100);
  gpt.bias = true;
  auto g = make_model(gpt);
  // Per block: 4C (two norms) + 3C^2 + 3C (qkv) + C^2 + C (proj) + 4C^2 + 4C (fc) + 4C^2 + C
  // (out); then the final norm 2C and the token table V C (the tied output).
  const int64_t C = 32, V = 100;
  const int64_t n_gpt = 3 * (12 * C * C + 13 * C) + 2 * C + V * C;
  CHECK(g->flops_per_token(64) == 6.0 * n_gpt + 12.0 * 3 * C * 64);

  ModelConfig llama = test::transformer_config("llama", 2, 4, 32, 64, 100);
  llama.n_kv_head = 2;
  llama.intermediate_size = 48;
  llama.tie_embeddings = false;
  auto l = make_model(llama);
  // Per block: q, o (C x C), k, v (C x C/2), gate, up, down (C x 48), two norms; final norm;
  // the lm_head (V x C) counts, the input table does not.
  const int64_t n_llama = 2 * (2 * C * C + 2 * C * C / 2 + 3 * C * 48 + 2 * C) + C + V * C;
  CHECK(l->flops_per_token(16) == 6.0 * n_llama + 12.0 * 2 * C * 16);
}

TEST_CASE("a run with train.peak_flops reports achieved FLOP/s and MFU", "[integration][mfu][cli]") {
  test::TempDir dir("frugal-mfu");
  auto r = test::run_command(test::frugal_binary() + " train --set run.dir=" +
                             test::quote(dir.path().string()) +
                             " --set run.name=m --set train.peak_flops=1e11 --set train.max_steps=4"
                             " --set train.log_every=1 --set train.eval_batches=0"
                             " --set train.progress=lines --set train.checkpoint_every=0"
                             " --set generate.tokens=0",
                             300);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("tok/s MFU "));
  std::istringstream lines(test::read_text(dir / "m" / "metrics.jsonl"));
  int records = 0;
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("step_time_s")) continue;
    ++records;
    const double fpt = j.at("model_flops_per_token").get<double>();
    const double achieved = j.at("achieved_flops").get<double>();
    CHECK(fpt > 1e6);
    CHECK(j.at("mfu").get<double>() == Approx(achieved / 1e11).epsilon(1e-9));
    // tokens per step = samples x seq_len: samples_per_s x seq_len x FLOPs per token.
    CHECK(achieved > 0);
    CHECK(achieved / (j.at("samples_per_s").get<double>() * fpt) == Approx(128.0).epsilon(1e-6));
  }
  CHECK(records == 4);
}
