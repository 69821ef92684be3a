// `frugal generate`: greedy decoding with the key/value cache gives exactly transformers'
// generate(do_sample=False) ids on random Llama and Qwen2 folders and on a GPT run's export,
// stops at the same end-of-text token, and streams text as transformers decodes it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/cli.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace generate_cli_test {

const std::string kPrompt = "5,17,42,3";

nlohmann::json generate_ids(const fs::path& source, const std::string& extra = "") {
  auto r = test::frugal("generate " + test::quote(source.string()) + " --prompt-ids " + kPrompt +
                        " --max-new-tokens 64 --ids" + extra);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("tokens/s"));
  return test::last_json_line(r.out);
}

}  // namespace generate_cli_test

using namespace generate_cli_test;

TEST_CASE("frugal generate greedy equals transformers on Llama and Qwen2 folders",
          "[integration][python][hf][generate]") {
  test::TempDir dir("frugal-generate");
  auto made = test::python_script(
      "generate_reference.py", "make " + test::quote(dir.path().string()) + " " + kPrompt + " 64");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  const nlohmann::json expected = test::last_json_line(made.out);
  for (const std::string kind : {"llama", "qwen2", "llama-eos"}) {
    INFO(kind);
    const nlohmann::json got = generate_ids(dir / kind);
    CHECK(got["tokens"] == expected[kind]);
    // The Llama with an end-of-text id stops on it, as transformers does, after 10 tokens.
    CHECK(got["stopped"].get<bool>() == (kind == "llama-eos"));
    CHECK(got["tokens"].size() == (kind == "llama-eos" ? 10u : 64u));
  }
  // An export keeps the model's identity: a run fine-tuned from llama-eos (a learning rate too
  // small to move a weight, so it still stops after 10 tokens) and exported stops in
  // transformers' generate where frugal generate on the run stops.
  {
    auto ft = test::frugal(
        "train --set run.dir=" + test::quote(dir.path().string()) +
        " --set run.name=ft --set model.size= --set model.type=llama --set model.init_from=" +
        test::quote((dir / "llama-eos").string()) +
        " --set data.type=synthetic --set data.seq_len=16"
        " --set data.micro_batch_size=4 --set train.max_steps=2"
        " --set optim.lr=1e-9 --set schedule.min_lr=0 --set train.eval_batches=0"
        " --set generate.tokens=0 --set train.progress=none");
    INFO(ft.out << ft.err);
    REQUIRE(ft.exit_code == 0);
    auto e = test::frugal("export " + test::quote((dir / "ft").string()) + " --format hf -o " +
                          test::quote((dir / "ft-hf").string()));
    INFO(e.out << e.err);
    REQUIRE(e.exit_code == 0);
    auto greedy = test::python_script(
        "generate_reference.py",
        "greedy " + test::quote((dir / "ft-hf").string()) + " " + kPrompt + " 64");
    INFO(greedy.out << greedy.err);
    REQUIRE(greedy.exit_code == 0);
    const auto theirs = nlohmann::json::parse(greedy.out.substr(greedy.out.rfind('[')));
    const nlohmann::json ours = generate_ids(dir / "ft");
    CHECK(ours["stopped"].get<bool>());
    CHECK(ours["tokens"] == theirs);
    CHECK(theirs.size() == 10u);
  }
  // Sampling is reproducible from the seed and differs from greedy.
  const nlohmann::json a =
      generate_ids(dir / "llama", " --temperature 1 --top-k 20 --top-p 0.9 --seed 7");
  const nlohmann::json b =
      generate_ids(dir / "llama", " --temperature 1 --top-k 20 --top-p 0.9 --seed 7");
  CHECK(a["tokens"] == b["tokens"]);
  CHECK(a["tokens"] != expected["llama"]);

  // Bad input: one line, exit 2.
  auto too_long = test::frugal("generate " + test::quote((dir / "llama").string()) +
                               " --prompt-ids " + kPrompt + " --max-new-tokens 300");
  CHECK(too_long.exit_code == 2);
  CHECK_THAT(too_long.err, Catch::Contains("exceed the model's context of 256 tokens"));
  auto bad_id =
      test::frugal("generate " + test::quote((dir / "llama").string()) + " --prompt-ids 5,96");
  CHECK(bad_id.exit_code == 2);
  CHECK_THAT(bad_id.err, Catch::Contains("'96' is not a token id from 0 to 95"));
  auto no_tokenizer =
      test::frugal("generate " + test::quote((dir / "llama").string()) + " --prompt hi");
  CHECK(no_tokenizer.exit_code == 2);
  CHECK_THAT(no_tokenizer.err, Catch::Contains("has no tokenizer"));
  auto chat = test::frugal("generate " + test::quote((dir / "llama").string()) + " --chat hi");
  CHECK(chat.exit_code == 2);
  CHECK_THAT(chat.err, Catch::Contains("--chat needs a tokenizer"));
}

TEST_CASE("frugal generate from a GPT run equals transformers on its export",
          "[integration][python][hf][generate]") {
  test::TempDir dir("frugal-generate-gpt");
  auto r = test::frugal("train --set run.dir=" + test::quote(dir.path().string()) +
                        " --set run.name=g --set model.size=gpt-tiny --set model.vocab_size=64"
                        " --set model.block_size=128 --set data.type=synthetic"
                        " --set data.micro_batch_size=4 --set train.max_steps=2"
                        " --set train.eval_batches=0 --set generate.tokens=0"
                        " --set train.progress=none");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto e = test::frugal("export " + test::quote((dir / "g").string()) + " --format hf -o " +
                        test::quote((dir / "hf").string()));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  auto greedy =
      test::python_script("generate_reference.py",
                          "greedy " + test::quote((dir / "hf").string()) + " " + kPrompt + " 64");
  INFO(greedy.out << greedy.err);
  REQUIRE(greedy.exit_code == 0);
  const auto expected = nlohmann::json::parse(greedy.out.substr(greedy.out.rfind('[')));
  CHECK(generate_ids(dir / "g")["tokens"] == expected);
}
