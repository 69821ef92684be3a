// Shards know their tokenizer: prepare-text writes `<shard>.json` with the tokenizer's
// identity and end-of-text id; training a model whose init_from tokenizer is another one (or
// bytes) is refused naming both unless data.allow_tokenizer_mismatch; data.eot_token defaults
// from the shard (the same losses as setting it); a stale meta file is ignored with a warning.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "frugal/data/shard_meta.h"
#include "frugal/data/tokenizer.h"
#include "support/cli.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace test_shard_tokenizer {

std::vector<double> train_losses(const fs::path& run) {
  std::vector<double> losses;
  for (const auto& row : test::step_rows(run / "metrics.jsonl")) {
    losses.push_back(row["loss"].get<double>());
  }
  return losses;
}

// 30 short documents: prepare-text ends each file with the end-of-text token.
void write_corpus(const fs::path& dir) {
  for (int f = 0; f < 30; ++f) {
    std::string text;
    for (int i = 0; i < 4; ++i) {
      text += "Fortune " + std::to_string(f * 4 + i) +
              ": the early bird gets the worm, but the second mouse gets the cheese.\n";
    }
    test::write_text(dir / fmt::format("f{:02}.txt", f), text);
  }
}

}  // namespace test_shard_tokenizer

using namespace test_shard_tokenizer;

TEST_CASE("a shard records its tokenizer and training checks it against init_from",
          "[integration][python][llama][data]") {
  test::TempDir dir("frugal-shard-tokenizer");
  const std::string cd = "cd " + test::quote(dir.path().string()) + " && ";
  const std::string make = cd + test::python() + " " +
                           test::quote((test::source_dir() / "tools/make_tiny_llama.py").string());
  write_corpus(dir / "corpus");
  for (const std::string& args : {std::string(" models/a --vocab 320 --corpus corpus"),
                                  std::string(" models/b --vocab 300 --corpus corpus")}) {
    auto made = test::run_command(make + args);
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
  }
  for (const std::string& args : {std::string("corpus --tokenizer models/a -o data/a.bin"),
                                  std::string("corpus --tokenizer models/b -o data/b.bin"),
                                  std::string("corpus -o data/bytes.bin")}) {
    auto prepared =
        test::run_command(cd + test::quote(test::frugal_binary()) + " prepare-text " + args);
    INFO(prepared.out << prepared.err);
    REQUIRE(prepared.exit_code == 0);
  }

  // The meta file: the folder's identity, which a re-formatted copy of its tokenizer.json shares
  // (the hash is of the parsed JSON without truncation/padding), its vocabulary and end of text.
  const auto meta = nlohmann::json::parse(test::read_text(dir / "data/a.bin.json"));
  const TokenizerIdentity a = tokenizer_identity(dir / "models/a");
  CHECK(meta["tokenizer"]["hash"] == a.hash);
  CHECK(meta["tokenizer"]["vocab_size"] == 320);
  CHECK(meta["tokenizer"]["eot_token"] == 319);
  CHECK(fs::file_size(dir / "data/a.bin") > 0);
  auto reformatted = nlohmann::json::parse(test::read_text(dir / "models/a/tokenizer.json"));
  reformatted["truncation"] = {{"max_length", 16}};
  test::write_text(dir / "copy/tokenizer.json", reformatted.dump(4));
  CHECK(tokenizer_identity(dir / "copy/tokenizer.json").hash == a.hash);
  CHECK(tokenizer_identity(dir / "models/b").hash != a.hash);
  CHECK(nlohmann::json::parse(test::read_text(dir / "data/bytes.bin.json"))["tokenizer"]["hash"] ==
        "bytes");

  const std::string yaml =
      "run: {dir: runs, seed: 5}\n"
      "model: {init_from: models/a}\n"
      "data: {type: tokens, path: data/a.bin, seq_len: 32, micro_batch_size: 4}\n"
      "optim: {type: adamw, lr: 0.003}\n"
      "train: {max_steps: 3, log_every: 1, checkpoint_every: 100, progress: none}\n";
  test::write_text(dir / "ft.yaml", yaml);
  const std::string train = cd + test::quote(test::frugal_binary()) + " train ft.yaml ";

  // data.eot_token defaults from the shard: the same losses as setting it.
  auto implicit = test::run_command(train + "--set run.name=implicit");
  INFO(implicit.out << implicit.err);
  REQUIRE(implicit.exit_code == 0);
  CHECK_THAT(
      implicit.out + implicit.err,
      Catch::Contains("documents end at token 319 (data.eot_token, from 'data/a.bin.json')"));
  auto explicit_eot = test::run_command(train + "--set run.name=explicit --set data.eot_token=319");
  REQUIRE(explicit_eot.exit_code == 0);
  // Without the meta file, no end-of-text id: the documents attend to each other.
  fs::copy_file(dir / "data/a.bin", dir / "data/no-meta.bin");
  auto no_meta = test::run_command(train + "--set run.name=other --set data.path=data/no-meta.bin");
  REQUIRE(no_meta.exit_code == 0);
  CHECK_THAT(no_meta.out + no_meta.err, !Catch::Contains("documents end at token"));
  const auto losses = train_losses(dir / "runs/implicit");
  REQUIRE(losses.size() == 3);
  CHECK(losses == train_losses(dir / "runs/explicit"));
  CHECK(losses != train_losses(dir / "runs/other"));  // the masks do change the losses

  // Another tokenizer's shard, byte shards and text data: refused before training, naming both.
  for (const std::string& data :
       {std::string("--set data.path=data/b.bin"), std::string("--set data.path=data/bytes.bin"),
        std::string("--set data.type=text --set data.path=corpus")}) {
    auto refused = test::run_command(train + "--set run.name=refused " + data);
    INFO(data << "\n" << refused.out << refused.err);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err,
               Catch::Contains("model.init_from's tokenizer is 'models/a/tokenizer.json' (" +
                               a.hash + ")") &&
                   Catch::Contains("prepare-text --tokenizer models/a") &&
                   Catch::Contains("data.allow_tokenizer_mismatch"));
    CHECK(!fs::exists(dir / "runs/refused/checkpoints"));
  }
  auto refused = test::run_command(train + "--set run.name=refused2 --set data.path=data/b.bin");
  CHECK_THAT(refused.err, Catch::Contains("data.path: 'data/b.bin' holds the tokenizer 'models/b"));
  auto bytes = test::run_command(train + "--set run.name=refused3 --set data.path=data/bytes.bin");
  CHECK_THAT(bytes.err, Catch::Contains("holds byte-level tokens"));
  // The override trains.
  auto allowed = test::run_command(train +
                                   "--set run.name=allowed --set data.path=data/b.bin "
                                   "--set data.allow_tokenizer_mismatch=true");
  INFO(allowed.out << allowed.err);
  CHECK(allowed.exit_code == 0);
  CHECK(train_losses(dir / "runs/allowed").size() == 3);

  // A shard replaced by another tool keeps a stale meta file: ignored with a warning, no eot.
  fs::copy_file(dir / "data/bytes.bin", dir / "data/stale.bin");
  fs::copy_file(dir / "data/a.bin.json", dir / "data/stale.bin.json");
  auto stale = test::run_command(train + "--set run.name=stale --set data.path=data/stale.bin");
  INFO(stale.out << stale.err);
  CHECK(stale.exit_code == 0);
  CHECK_THAT(stale.out + stale.err, Catch::Contains("describes") && Catch::Contains("ignored"));
  CHECK_THAT(stale.out + stale.err, !Catch::Contains("documents end at token"));
}
