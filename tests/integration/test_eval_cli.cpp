// `frugal eval`: the mean loss over sliding windows of a Hugging Face folder equals
// transformers' on the same windows (tests/python/window_eval_reference.py), and a run
// directory is evaluated the same way, over text read as bytes.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "support/cli.h"

using namespace frugal;

TEST_CASE("frugal eval of a transformers folder equals transformers on the same windows",
          "[integration][python][hf][eval]") {
  test::TempDir dir("frugal-eval");
  auto made =
      test::python_script("llama_reference.py", test::quote(dir.path().string()) + " llama");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  // 301 random tokens of the folder's 96 as a nanoGPT shard (uint16).
  at::manual_seed(3);
  const at::Tensor ids = at::randint(0, 96, {301}, at::kShort);
  {
    std::ofstream out(dir / "tokens.bin", std::ios::binary);
    out.write(static_cast<const char*>(ids.data_ptr()), 301 * 2);
  }
  for (const auto& [seq_len, stride] : {std::pair{64, 64}, std::pair{64, 24}, std::pair{17, 5}}) {
    const std::string args = test::quote((dir / "hf").string()) + " " +
                             test::quote((dir / "tokens.bin").string()) + " " +
                             std::to_string(seq_len) + " " + std::to_string(stride);
    auto f = test::frugal("eval " + test::quote((dir / "hf").string()) + " --data " +
                          test::quote((dir / "tokens.bin").string()) + " --seq-len " +
                          std::to_string(seq_len) + " --stride " + std::to_string(stride) +
                          " --device cpu");
    INFO(f.out << f.err);
    REQUIRE(f.exit_code == 0);
    auto p = test::python_script("window_eval_reference.py", args);
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 0);
    const auto ours = test::last_json_line(f.out), theirs = test::last_json_line(p.out);
    CHECK(ours.at("predicted") == 300);
    CHECK(ours.at("predicted") == theirs.at("predicted"));
    CHECK(ours.at("windows") == theirs.at("windows"));
    const double a = ours.at("mean_loss").get<double>(), b = theirs.at("mean_loss").get<double>();
    CHECK(std::abs(a - b) <= 1e-5 * b);
    CHECK(ours.at("perplexity").get<double>() == Approx(std::exp(a)).epsilon(1e-9));
  }
  // Bad input: one line each, exit 2.
  auto longer = test::frugal("eval " + test::quote((dir / "hf").string()) + " --data " +
                             test::quote((dir / "tokens.bin").string()) + " --seq-len 65");
  CHECK(longer.exit_code == 2);
  CHECK_THAT(longer.err, Catch::Contains("--seq-len 65 is longer than the model's context (64)"));
  test::write_text(dir / "notes.txt", "some text");
  auto text = test::frugal("eval " + test::quote((dir / "hf").string()) + " --data " +
                           test::quote((dir / "notes.txt").string()));
  CHECK(text.exit_code == 2);
  CHECK_THAT(text.err, Catch::Contains("is text, and the model has no tokenizer"));
}

TEST_CASE("frugal eval of a run reads text as bytes and counts every window", "[integration][eval]") {
  test::TempDir dir("frugal-eval-run");
  auto r = test::frugal("train " + test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()) +
                        " --set run.dir=" + test::quote(dir.path().string()) +
                        " --set run.name=r --set train.max_steps=2 --set train.eval_batches=0"
                        " --set train.progress=none --set generate.tokens=0 --set run.device=cpu");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  test::write_text(dir / "text.txt", std::string(1000, 'a') + "the end\n");  // 1008 bytes
  auto e = test::frugal("eval " + test::quote((dir / "r").string()) + " --data " +
                        test::quote((dir / "text.txt").string()) + " --seq-len 32 --stride 16");
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  const auto j = test::last_json_line(e.out);
  CHECK(j.at("tokens") == 1008);
  CHECK(j.at("predicted") == 1007);
  // Windows (the model's whole context, 32) start at 0, 16, ..., until one reaches the last
  // token: 61 x 16 + 32 = 1008.
  CHECK(j.at("windows") == 62);
  CHECK(j.at("mean_loss").get<double>() > 0);
  auto stride = test::frugal("eval " + test::quote((dir / "r").string()) + " --data " +
                             test::quote((dir / "text.txt").string()) + " --seq-len 10 --stride 11");
  CHECK(stride.exit_code == 2);
  CHECK_THAT(stride.err, Catch::Contains("--stride must be between 1 and --seq-len (10), got 11"));
}
