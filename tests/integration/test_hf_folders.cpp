// Hugging Face folders in and out through the CLI: `model.init_from` takes a folder
// transformers wrote (config.json decides the architecture; a YAML key that disagrees is an
// error naming both values), `frugal train` fine-tunes it, and `frugal export --format hf`
// writes a folder (sharded, with its index) that transformers' AutoModelForCausalLM loads
// with no missing or unexpected weight and whose logits equal frugal's within 1e-5; the same
// for a GPT, exported as GPT2LMHeadModel.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "frugal/config/load.h"
#include "frugal/engine/state.h"
#include "frugal/hf/folder.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/registry.h"
#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

test::CommandResult run_frugal(const std::string& args) {
  return test::run_command(test::frugal_binary() + " " + args);
}

// frugal's logits for a fixed batch, from the run's last checkpoint, into `file`.
void write_logits(const fs::path& run, const fs::path& file, int64_t vocab) {
  const fs::path ckpt_dir = *latest_checkpoint(run / "checkpoints");
  Checkpoint ckpt = load_checkpoint(ckpt_dir);
  // (resolved_model_config: the run's init_from folder may be relative to another directory)
  auto model = make_model(resolved_model_config(
      nlohmann::json::parse(ckpt.meta_json)["config"].get<std::string>(), "meta"));
  load_module_state(*model, ckpt.model, "model.pt");
  model->eval();
  at::manual_seed(9);
  at::Tensor x = at::randint(0, vocab, {2, 10}, at::kLong);
  at::Tensor logits = model->forward(x).detach().contiguous();
  io::write_safetensors(file, {{"x", x}, {"logits", logits}});
}

}  // namespace

TEST_CASE("a transformers llama folder is fine-tuned and exported back to transformers",
          "[integration][python][llama][hf]") {
  test::TempDir dir("frugal-hf-folders");
  auto made =
      test::python_script("llama_reference.py", test::quote(dir.path().string()) + " llama");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  const fs::path hf_in = dir / "hf";
  test::write_text(hf_in / "tokenizer_config.json", "{\"model_max_length\": 64}\n");
  {
    // Special ids the export must keep (a list, as Llama 3.1's eos is), so that transformers'
    // generate stops where this model does.
    auto config = nlohmann::json::parse(test::read_text(hf_in / "config.json"));
    config["bos_token_id"] = 3;
    config["eos_token_id"] = {5, 7};
    test::write_text(hf_in / "config.json", config.dump(2));
    fs::remove(hf_in / "generation_config.json");  // the export writes one from config.json's ids
  }
  test::write_text(dir / "ft.yaml",
                   "run: {dir: '" + dir.path().string() + "', name: ft}\n"
                   "model: {init_from: '" + hf_in.string() + "'}\n"
                   "data: {type: synthetic, seq_len: 16, micro_batch_size: 4}\n"
                   "train: {max_steps: 3, eval_batches: 0, progress: none}\n"
                   "generate: {tokens: 0}\n");
  const std::string base = "train " + test::quote((dir / "ft.yaml").string());
  {
    INFO("a YAML key that disagrees with config.json names both values");
    auto r = run_frugal(base + " --set run.name=bad --set model.n_layer=3");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("model.n_layer: 3 here, 2 in") &&
                          Catch::Contains("config.json (model.init_from)"));
  }
  auto r = run_frugal(base + " --set model.n_layer=2");  // agrees: accepted
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("weights from"));

  const fs::path hf_out = dir / "exported";
  auto e = run_frugal("export " + test::quote((dir / "ft").string()) + " --format hf -o " +
                  test::quote(hf_out.string()) + " --max-shard-mb 0.05");
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK(fs::exists(hf_out / "model.safetensors.index.json"));
  {
    // 0.05 MiB shards: the ~0.4 MB model is cut into several, each listed in the index.
    const auto index = nlohmann::json::parse(test::read_text(hf_out / "model.safetensors.index.json"));
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
    CHECK(files.size() >= 4);
    for (const auto& f : files) CHECK(fs::exists(hf_out / f));
    CHECK(index["weight_map"].size() == 21);
  }
  CHECK(fs::exists(hf_out / "tokenizer_config.json"));  // carried over from the input folder
  {
    const auto config = nlohmann::json::parse(test::read_text(hf_out / "config.json"));
    CHECK(config.at("bos_token_id") == 3);
    CHECK(config.at("eos_token_id") == nlohmann::json({5, 7}));
    // No generation_config.json in the source: one is written with the same ids.
    const auto generation = nlohmann::json::parse(test::read_text(hf_out / "generation_config.json"));
    CHECK(generation.at("eos_token_id") == nlohmann::json({5, 7}));
    CHECK(generation.at("bos_token_id") == 3);
  }
  {
    INFO("refused without --overwrite");
    auto again = run_frugal("export " + test::quote((dir / "ft").string()) + " --format hf -o " +
                        test::quote(hf_out.string()));
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.err, Catch::Contains("already exists"));
  }
  write_logits(dir / "ft", dir / "logits.safetensors", 96);
  auto check = test::python_script(
      "check_hf_export.py",
      test::quote(hf_out.string()) + " " + test::quote((dir / "logits.safetensors").string()));
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("\"architecture\": \"LlamaForCausalLM\"") &&
                           Catch::Contains("\"bos_token_id\": 3, \"eos_token_id\": [5, 7]"));
  // And frugal reads its own export back: the same architecture and weights.
  const ModelConfig back = hf::read_model_config(hf_out);
  CHECK(back.n_kv_head == 2);
  CHECK(back.rope_scaling == "llama3");
  CHECK_FALSE(back.tie_embeddings);
  auto model = make_model(back);
  hf::load_weights(*model, hf_out);
}

TEST_CASE("a GPT exports as GPT2LMHeadModel with the same logits", "[integration][python][hf]") {
  test::TempDir dir("frugal-hf-gpt");
  auto r = run_frugal("train --set run.dir=" + test::quote(dir.path().string()) +
                  " --set run.name=g --set model.size=gpt-tiny --set model.vocab_size=64"
                  " --set data.type=synthetic --set data.micro_batch_size=4"
                  " --set train.max_steps=2 --set train.eval_batches=0 --set generate.tokens=0"
                  " --set train.progress=none");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto e = run_frugal("export " + test::quote((dir / "g").string()) + " --format hf -o " +
                  test::quote((dir / "hf").string()));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK(fs::exists(dir / "hf" / "model.safetensors"));
  write_logits(dir / "g", dir / "logits.safetensors", 64);
  auto check = test::python_script("check_hf_export.py",
                                   test::quote((dir / "hf").string()) + " " +
                                       test::quote((dir / "logits.safetensors").string()));
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("\"architecture\": \"GPT2LMHeadModel\""));
}

TEST_CASE("the README's fine-tuning example runs as written", "[integration][python][llama][hf]") {
  // tools/make_tiny_llama.py, prepare-text with its tokenizer, configs/llama-finetune.yaml
  // (fewer steps), export --format hf, and transformers loads the result with frugal's logits.
  test::TempDir dir("frugal-llama-ft");
  const std::string cd = "cd " + test::quote(dir.path().string()) + " && ";
  auto made = test::run_command(
      cd + test::python() + " " +
      test::quote((test::source_dir() / "tools/make_tiny_llama.py").string()) +
      " models/tiny-llama --vocab 320");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  auto prepared = test::run_command(cd + test::frugal_binary() +
                                    " prepare-text /usr/share/games/fortunes --tokenizer "
                                    "models/tiny-llama -o data/fortunes-tiny-llama.bin");
  INFO(prepared.out << prepared.err);
  REQUIRE(prepared.exit_code == 0);
  auto trained = test::run_command(
      cd + test::frugal_binary() + " train " +
      test::quote((test::source_dir() / "configs/llama-finetune.yaml").string()) +
      " --set train.max_steps=4 --set train.eval_every=2 --set train.eval_batches=1"
      " --set train.checkpoint_every=2 --set train.progress=none"
      // A greedy sample through the folder's tokenizer, compared with transformers' below.
      " --set generate.tokens=12 --set generate.top_k=1 --set 'generate.prompt=Why do'");
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.out, Catch::Contains("steps: 4") && Catch::Contains("val loss"));
  // The end-of-text id from the shard's meta file (the smaller vocabulary's last id).
  CHECK_THAT(trained.out + trained.err, Catch::Contains("documents end at token 319"));
  auto exported = test::run_command(cd + test::frugal_binary() +
                                    " export runs/llama-finetune --format hf -o models/tiny-llama-ft");
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(fs::exists(dir / "models" / "tiny-llama-ft" / "tokenizer.json"));
  write_logits(dir / "runs" / "llama-finetune", dir / "logits.safetensors", 320);
  auto check = test::python_script("check_hf_export.py",
                                   test::quote((dir / "models" / "tiny-llama-ft").string()) + " " +
                                       test::quote((dir / "logits.safetensors").string()));
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);

  // The sample decodes to the same text as transformers' greedy continuation of the exported
  // folder, through the tokenizers package.
  const std::string begin = "--- sample ---\n", end = "\n--- end sample ---";
  const size_t from = trained.out.find(begin), to = trained.out.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  const std::string sample = trained.out.substr(from + begin.size(), to - from - begin.size());
  auto greedy = test::python_script(
      "greedy_sample.py",
      test::quote((dir / "models" / "tiny-llama-ft").string()) + " 'Why do' 12");
  INFO(greedy.err);
  REQUIRE(greedy.exit_code == 0);
  std::cout << "greedy sample: '" << sample << "'\n";
  CHECK(!sample.empty());
  CHECK(sample == greedy.out);
  // frugal generate on the run (the key/value cache, streamed text) writes the same text.
  auto generated =
      test::run_command(cd + test::frugal_binary() +
                        " generate runs/llama-finetune --prompt 'Why do' --max-new-tokens 12");
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);
  CHECK(generated.out == greedy.out + "\n");

  // configs/llama-qlora.yaml on the same folder: the q and o projections' base in NF4, adapters
  // on them, the rest frozen.
  auto qlora = test::run_command(
      cd + test::frugal_binary() + " train " +
      test::quote((test::source_dir() / "configs/llama-qlora.yaml").string()) +
      " --set train.max_steps=4 --set train.eval_every=2"
      " --set train.eval_batches=1 --set train.checkpoint_every=2 --set train.progress=none");
  INFO(qlora.out << qlora.err);
  REQUIRE(qlora.exit_code == 0);
  CHECK_THAT(qlora.out, Catch::Contains("steps: 4") && Catch::Contains("val loss"));
  CHECK_THAT(qlora.out + qlora.err, Catch::Contains("trainable ("));
}
