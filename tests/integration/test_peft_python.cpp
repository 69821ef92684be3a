// LoRA against Hugging Face PEFT 0.21 (tests/python/peft_reference.py): on a small random Llama
// and Qwen2 (q/k/v biases, rsLoRA) built by transformers,
//   - a PEFT-written adapter folder loaded by frugal (model.init_adapter's hf::load_adapter)
//     gives PEFT's logits and every adapter gradient within 1e-5 (fp32), and 20 AdamW steps
//     PEFT's losses within 1e-4;
//   - QLoRA: 20 steps on NF4 bases within 1e-4 of a loop on torchao's to_nf4 / linear_nf4 with
//     the same LoRA formula;
//   - a trained run exported with --format peft loads in PeftModel.from_pretrained with no
//     missing or unexpected adapter key and frugal's logits within 1e-5; --format hf (the
//     adapters merged) loads in transformers within 1e-4; a QLoRA run's merged export
//     (dequantized base) in frugal within 1e-4;
//   - a bad adapter folder is a one-line error naming the file, the key or the tensor.
// Skipped where peft or torchao is not installed (requirements-test.txt).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "frugal/config/hf_config.h"
#include "frugal/config/load.h"
#include "frugal/engine/engine.h"
#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/train/run_model.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/model_configs.h"
#include "support/skip.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace peft_python_test {

// peft_reference.py with its arguments; exit code 3 (peft or torchao missing) skips the case.
bool reference(const fs::path& out, const std::string& args) {
  auto r = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/peft_reference.py").string()) + " " +
      test::quote(out.string()) + " " + args);
  if (r.exit_code == 3) return !test::skip("peft or torchao is not installed: " + r.out);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return true;
}

std::map<std::string, at::Tensor> tensors_of(const fs::path& file) {
  std::map<std::string, at::Tensor> out;
  for (auto& [k, v] : io::read_safetensors(file)) out[k] = v;
  return out;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a - b).abs().max().item<double>();
}

// The folder's architecture with the reference's LoRA settings.
ModelConfig lora_config(const fs::path& hf, const nlohmann::json& lora) {
  ModelConfig mc = hf::read_model_config(hf);
  mc.lora.rank = lora["r"].get<int64_t>();
  mc.lora.alpha = lora["alpha"].get<double>();
  mc.lora.rslora = lora["rslora"].get<bool>();
  mc.lora.targets = lora["targets"].get<std::vector<std::string>>();
  return mc;
}

std::shared_ptr<Model> adapted_model(const ModelConfig& mc, const fs::path& hf,
                                     const fs::path& adapter) {
  auto model = make_model(mc);
  hf::load_weights(*model, hf);
  apply_finetuning(*model, mc);
  hf::load_adapter(*model, mc, adapter);
  return model;
}

// STEPS AdamW steps (constant lr) over the reference's batches: the losses.
std::vector<double> train(const std::shared_ptr<Model>& model, const nlohmann::json& setup,
                          const std::map<std::string, at::Tensor>& batches) {
  OptimConfig oc;
  oc.type = "adamw";
  oc.lr = setup["optim"]["lr"].get<double>();
  oc.betas = {setup["optim"]["betas"][0].get<double>(), setup["optim"]["betas"][1].get<double>()};
  oc.eps = setup["optim"]["eps"].get<double>();
  oc.weight_decay = setup["optim"]["weight_decay"].get<double>();
  const int64_t steps = setup["steps"].get<int64_t>();
  Engine engine(EngineOptions{StrategyConfig{}, 0.0});
  engine.setup(model, make_optimizer(oc, *model),
               std::make_shared<LrSchedule>(ScheduleConfig{}, oc.lr, steps));
  model->train();
  std::vector<double> losses;
  for (int64_t s = 0; s < steps; ++s) {
    Batch b{batches.at("x." + std::to_string(s)), batches.at("y." + std::to_string(s))};
    losses.push_back(
        engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); })
            .loss);
  }
  return losses;
}

double worst_loss_diff(const std::vector<double>& ours, const nlohmann::json& setup) {
  const auto theirs = setup["losses"].get<std::vector<double>>();
  REQUIRE(ours.size() == theirs.size());
  double worst = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(ours[i] - theirs[i]));
  CHECK(theirs.back() < theirs.front() - 0.1);  // the adapters learned something
  return worst;
}

test::CommandResult run_frugal(const std::string& args) {
  return test::run_command(test::frugal_binary() + " " + args);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace peft_python_test

using namespace peft_python_test;

TEST_CASE("peft: LoRA logits, adapter gradients and 20 AdamW steps equal PEFT's (llama, qwen2)",
          "[integration][python][peft]") {
  for (const std::string arch : {"llama", "qwen2"}) {
    SECTION(arch) {
      test::TempDir dir("frugal-peft-" + arch);
      if (!reference(dir.path(), arch + " lora")) return;
      const auto setup = nlohmann::json::parse(test::read_text(dir / "reference.json"));
      const auto batches = tensors_of(dir / "batches.safetensors");
      const auto ref = tensors_of(dir / "reference.safetensors");
      const ModelConfig mc = lora_config(dir / "hf", setup["lora"]);
      CHECK(mc.qkv_bias == (arch == "qwen2"));
      auto model = adapted_model(mc, dir / "hf", dir / "adapter");

      model->eval();
      const at::Tensor x = batches.at("x.0"), y = batches.at("y.0");
      const at::Tensor logits = model->forward(x);
      const double logit_diff = max_diff(logits.detach(), ref.at("logits"));
      std::cout << arch << ": PEFT adapter loaded, logits max |diff| " << logit_diff << "\n";
      CHECK(logit_diff < 1e-5);
      (model->loss_sum(logits, y) / static_cast<double>(y.numel())).backward();
      int64_t compared = 0;
      double worst_grad = 0.0;
      for (const auto& p : model->named_parameters()) {
        if (!p.value().requires_grad()) continue;
        INFO(p.key());
        const std::string key = "grad." + hf::peft_name(mc, p.key());
        REQUIRE(ref.count(key) == 1);
        const double d = max_diff(p.value().grad(), ref.at(key));
        worst_grad = std::max(worst_grad, d);
        CHECK(d < 1e-5);
        CHECK(ref.at(key).abs().max().item<double>() > 0.0);  // B nonzero: every A learns too
        ++compared;
      }
      CHECK(compared == setup["adapters"].get<int64_t>());
      std::cout << arch << ": adapter gradients max |diff| " << worst_grad << " (" << compared
                << " tensors)\n";
      model->zero_grad();

      const double worst = worst_loss_diff(train(model, setup, batches), setup);
      double worst_final = 0.0;
      for (const auto& p : model->named_parameters()) {
        if (!p.value().requires_grad()) continue;
        worst_final = std::max(worst_final, max_diff(p.value().detach(),
                                                     ref.at("final." + hf::peft_name(mc, p.key()))));
      }
      std::cout << arch << ": 20 AdamW steps, largest loss difference " << worst
                << ", adapters after them max |diff| " << worst_final << "\n";
      CHECK(worst < 1e-4);
      CHECK(worst_final < 1e-4);
    }
  }
}

TEST_CASE("peft: QLoRA's 20 steps equal a loop on torchao's NF4 with the same adapters",
          "[integration][python][peft][nf4]") {
  for (const std::string arch : {"llama", "qwen2"}) {
    SECTION(arch) {
      test::TempDir dir("frugal-qlora-" + arch);
      if (!reference(dir.path(), arch + " qlora")) return;
      const auto setup = nlohmann::json::parse(test::read_text(dir / "reference.json"));
      const auto batches = tensors_of(dir / "batches.safetensors");
      ModelConfig mc = lora_config(dir / "hf", setup["lora"]);
      mc.quantize_base.type = "nf4";  // the LoRA targets' weights
      auto model = adapted_model(mc, dir / "hf", dir / "qlora_adapter");
      int64_t quantized = 0;
      for (const auto& [name, layer] : linear_layers(*model)) quantized += nf4_weight_of(*layer) != nullptr;
      CHECK(quantized == 2 * static_cast<int64_t>(mc.lora.targets.size()));
      model->eval();
      const double logit_diff = max_diff(model->forward(batches.at("x.0")).detach(),
                                         tensors_of(dir / "reference.safetensors").at("logits"));
      const double worst = worst_loss_diff(train(model, setup, batches), setup);
      std::cout << arch << " qlora: logits max |diff| " << logit_diff
                << ", 20 AdamW steps, largest loss difference " << worst << "\n";
      CHECK(logit_diff < 1e-5);
      CHECK(worst < 1e-4);
    }
  }
}

namespace peft_python_test {

// frugal's logits of a fixed batch from the run's last checkpoint (the model rebuilt as export
// rebuilds it), written to `file` with the batch.
at::Tensor run_logits(const fs::path& run, const fs::path& file, int64_t vocab) {
  const fs::path ckpt_dir = *latest_checkpoint(run / "checkpoints");
  Checkpoint ckpt = load_checkpoint(ckpt_dir);
  const Config cfg = resolved_config(
      nlohmann::json::parse(ckpt.meta_json)["config"].get<std::string>(), "meta.json");
  auto model = restore_run_model(cfg, ckpt.model, "model.pt");
  model->eval();
  at::manual_seed(9);
  const at::Tensor x = at::randint(0, vocab, {2, 10}, at::kLong);
  const at::Tensor logits = model->forward(x).detach().contiguous();
  io::write_safetensors(file, {{"x", x}, {"logits", logits}});
  return logits;
}

}  // namespace peft_python_test

TEST_CASE("peft: a LoRA run exported with --format peft loads in PeftModel, with --format hf in "
          "transformers",
          "[integration][python][peft][hf]") {
  test::TempDir dir("frugal-peft-export");
  if (!reference(dir.path(), "llama lora")) return;
  // Fine-tuned by the CLI from the PEFT-written adapter (model.init_adapter).
  test::write_text(dir / "ft.yaml",
                   "run: {dir: '" + dir.path().string() + "', name: ft, seed: 1}\n"
                   "model:\n"
                   "  init_from: '" + (dir / "hf").string() + "'\n"
                   "  init_adapter: '" + (dir / "adapter").string() + "'\n"
                   "  lora: {rank: 4, alpha: 8, targets: [q_proj, v_proj, down_proj]}\n"
                   "data: {type: synthetic, seq_len: 12, micro_batch_size: 2}\n"
                   "optim: {lr: 0.01}\n"
                   "train: {max_steps: 2, eval_batches: 0, progress: none}\n"
                   "generate: {tokens: 0}\n");
  auto r = run_frugal("train " + test::quote((dir / "ft.yaml").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("adapters from"));

  const std::string run = test::quote((dir / "ft").string());
  auto e = run_frugal("export " + run + " --format peft -o " + test::quote((dir / "peft").string()));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK_THAT(e.out, Catch::Contains("wrote 12 tensors"));
  const auto config = nlohmann::json::parse(test::read_text(dir / "peft/adapter_config.json"));
  CHECK(config["peft_type"] == "LORA");
  CHECK(config["r"] == 4);
  CHECK(config["lora_alpha"] == 8);
  CHECK(config["use_rslora"] == false);
  CHECK(config["bias"] == "none");
  CHECK(config["task_type"] == "CAUSAL_LM");
  CHECK(config["target_modules"] == nlohmann::json({"down_proj", "q_proj", "v_proj"}));
  CHECK(config["base_model_name_or_path"] == (dir / "hf").string());
  {
    INFO("an existing output is refused without --overwrite, replaced with it");
    auto again = run_frugal("export " + run + " --format peft -o " + test::quote((dir / "peft").string()));
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.err, Catch::Contains("already exists (pass --overwrite to replace it)"));
    auto over = run_frugal("export " + run + " --format peft --overwrite -o " +
                           test::quote((dir / "peft").string()));
    CHECK(over.exit_code == 0);
  }
  auto m = run_frugal("export " + run + " --format hf -o " + test::quote((dir / "merged").string()));
  INFO(m.out << m.err);
  REQUIRE(m.exit_code == 0);
  CHECK_THAT(m.out, Catch::Contains("wrote 21 tensors"));  // the base's tensors, none of LoRA's

  const at::Tensor logits = run_logits(dir / "ft", dir / "logits.safetensors", 96);
  {
    INFO("the adapters trained: they are not the folder's they started from");
    const auto start = tensors_of(dir / "adapter/adapter_model.safetensors");
    const auto end = tensors_of(dir / "peft/adapter_model.safetensors");
    REQUIRE(start.size() == end.size());
    for (const auto& [k, t] : start) CHECK(max_diff(t, end.at(k)) > 0.0);
  }
  auto check = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/peft_reference.py").string()) + " " +
      test::quote(dir.path().string()) + " check " + test::quote((dir / "hf").string()) + " " +
      test::quote((dir / "peft").string()) + " " + test::quote((dir / "merged").string()));
  INFO(check.out << check.err);
  REQUIRE(check.exit_code == 0);
  const auto got = nlohmann::json::parse(check.out.substr(check.out.rfind("{\"missing\"")));
  CHECK(got["missing"].empty());
  CHECK(got["unexpected"].empty());
  CHECK(got["peft_warnings"].empty());
  CHECK(got["adapter_tensors"] == 12);
  CHECK(got["merged_missing"].empty());
  CHECK(got["merged_unexpected"].empty());
  const auto theirs = tensors_of(dir / "check.safetensors");
  const double peft_diff = max_diff(logits, theirs.at("peft_logits"));
  const double merged_diff = max_diff(logits, theirs.at("merged_logits"));
  std::cout << "export: PeftModel.from_pretrained logits max |diff| " << peft_diff
            << ", merged --format hf in transformers " << merged_diff << "\n";
  CHECK(peft_diff < 1e-5);
  CHECK(merged_diff < 1e-4);
}

TEST_CASE("peft: a QLoRA run exports its adapters, and its dequantized base with them merged",
          "[integration][peft][nf4][hf]") {
  // A random base (no model.init_from): the export rebuilds it from run.seed.
  test::TempDir dir("frugal-qlora-export");
  test::write_text(dir / "q.yaml",
                   "run: {dir: '" + dir.path().string() + "', name: q, seed: 7}\n"
                   "model: " +
                       test::transformer_yaml(
                           "llama", 2, 4, 128, 16, 64,
                           "n_kv_head: 2, intermediate_size: 256, "
                           "lora: {rank: 4, alpha: 8, targets: [q_proj, o_proj, down_proj]}, "
                           "quantize_base: {type: nf4}") +
                       "\n"
                   "data: {type: synthetic, micro_batch_size: 2}\n"
                   "optim: {lr: 0.01}\n"
                   "train: {max_steps: 2, eval_batches: 0, progress: none}\n"
                   "generate: {tokens: 0}\n");
  auto r = run_frugal("train " + test::quote((dir / "q.yaml").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string run = test::quote((dir / "q").string());
  auto p = run_frugal("export " + run + " --format peft -o " + test::quote((dir / "peft").string()));
  INFO(p.out << p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(tensors_of(dir / "peft/adapter_model.safetensors").size() == 12);
  auto e = run_frugal("export " + run + " --format hf -o " + test::quote((dir / "hf").string()));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);

  const at::Tensor logits = run_logits(dir / "q", dir / "logits.safetensors", 64);
  // The merged folder as a plain model: no adapter, no NF4, the same outputs.
  const ModelConfig plain = hf::read_model_config(dir / "hf");
  auto model = make_model(plain);
  hf::load_weights(*model, dir / "hf");
  model->eval();
  const double d = max_diff(model->forward(tensors_of(dir / "logits.safetensors").at("x")).detach(),
                            logits);
  std::cout << "qlora: merged --format hf export logits max |diff| " << d << "\n";
  CHECK(d < 1e-4);
  CHECK(d > 0.0);  // the adapters trained: the merge is not the identity
}

TEST_CASE("peft: adapter folders round-trip, and a bad one is a one-line error",
          "[integration][peft][bad_input]") {
  test::TempDir dir("frugal-peft-bad");
  const auto tiny = [](int64_t width, int64_t rank, std::vector<std::string> targets) {
    ModelConfig m = test::transformer_config("llama", 1, 2, width, 8, 32);
    m.intermediate_size = 32;
    m.lora.rank = rank;
    m.lora.alpha = 4;
    m.lora.targets = std::move(targets);
    return m;
  };
  // A trained-looking adapter of a model: its tensors random (B nonzero).
  const auto adapters_of = [](const ModelConfig& mc) {
    at::manual_seed(11);
    auto model = make_model(mc);
    apply_finetuning(*model, mc);
    io::NamedTensors out;
    for (const auto& p : model->named_parameters()) {
      if (p.value().requires_grad()) out.emplace_back(p.key(), at::randn(p.value().sizes()));
    }
    return out;
  };
  const ModelConfig ours = tiny(16, 2, {"q_proj", "v_proj"});
  const auto load_into_ours = [&](const fs::path& folder, const ModelConfig& mc) {
    return error_of([&] {
      auto model = make_model(mc);
      apply_finetuning(*model, mc);
      hf::load_adapter(*model, mc, folder);
    });
  };
  {
    INFO("frugal's own folder reads back: the same tensors");
    const io::NamedTensors written = adapters_of(ours);
    hf::write_adapter_folder(dir / "same", ours, written);
    auto model = make_model(ours);
    apply_finetuning(*model, ours);
    hf::load_adapter(*model, ours, dir / "same");
    auto params = model->named_parameters();
    for (const auto& [name, t] : written) CHECK(at::equal(params[name], t));
    CHECK_THAT(error_of([&] { hf::write_adapter_folder(dir / "same", ours, written); }),
               Catch::Contains("already exists"));
  }
  const std::string cfg_file = (dir / "same/adapter_config.json").string();
  CHECK(load_into_ours(dir / "same", tiny(16, 4, {"q_proj", "v_proj"})) ==
        cfg_file + ": r: 2 here, model.lora.rank is 4");
  {
    ModelConfig m = ours;
    m.lora.alpha = 16;
    CHECK(load_into_ours(dir / "same", m) == cfg_file + ": lora_alpha: 4 here, model.lora.alpha is 16");
    m = ours;
    m.lora.rslora = true;
    CHECK(load_into_ours(dir / "same", m) ==
          cfg_file + ": use_rslora: false here, model.lora.rslora is true");
  }
  CHECK(load_into_ours(dir / "same", tiny(16, 2, {"q_proj"})) ==
        cfg_file + ": target_modules: adapts 'model.layers.0.self_attn.v_proj', which "
                   "model.lora.targets (q_proj) does not");
  CHECK(load_into_ours(dir / "same", tiny(16, 2, {"q_proj", "v_proj", "k_proj"})) ==
        cfg_file + ": target_modules: does not adapt 'model.layers.0.self_attn.k_proj', which "
                   "model.lora.targets (q_proj, v_proj, k_proj) does");
  const std::string q_a = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  {
    INFO("a missing tensor");
    io::NamedTensors some = adapters_of(ours);
    some.pop_back();  // v_proj's lora_B
    hf::write_adapter_folder(dir / "missing", ours, some);
    CHECK(load_into_ours(dir / "missing", ours) ==
          (dir / "missing/adapter_model.safetensors").string() +
              ": no tensor 'base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight' (the "
              "adapter of 'layers.0.self_attn.v_proj')");
  }
  {
    INFO("an extra tensor");
    hf::write_adapter_folder(dir / "extra", ours, adapters_of(ours));
    io::NamedTensors t = io::read_safetensors(dir / "extra/adapter_model.safetensors");
    t.emplace_back("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
                   at::ones({16}));
    fs::remove(dir / "extra/adapter_model.safetensors");
    io::write_safetensors(dir / "extra/adapter_model.safetensors", t);
    CHECK(load_into_ours(dir / "extra", ours) ==
          (dir / "extra/adapter_model.safetensors").string() +
              ": 'base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector' is not "
              "an adapter of the model (its adapters: 4 tensors, e.g. '" + q_a + "')");
  }
  {
    INFO("an adapter for another base, through the CLI: one line naming the tensor and both shapes");
    hf::write_adapter_folder(dir / "other", tiny(12, 2, {"q_proj", "v_proj"}),
                             adapters_of(tiny(12, 2, {"q_proj", "v_proj"})));
    const std::string model = test::transformer_yaml(
        "llama", 1, 2, 16, 8, 32,
        "intermediate_size: 32, init_adapter: '" + (dir / "other").string() +
            "', lora: {rank: 2, alpha: 4, targets: [q_proj, v_proj]}");
    test::write_text(dir / "ft.yaml",
                     "run: {dir: '" + dir.path().string() + "', name: ft}\n"
                     "model: " + model + "\n"
                     "data: {type: synthetic, micro_batch_size: 2}\n"
                     "train: {max_steps: 1, progress: none}\n");
    auto r = run_frugal("train " + test::quote((dir / "ft.yaml").string()));
    CHECK(r.exit_code == 2);
    CHECK(r.err == "frugal: error: " + (dir / "other/adapter_model.safetensors").string() + ": '" +
                       q_a + "' is 2x12 in the adapter, 2x16 in the model (an adapter for another "
                             "base model?)\n");
    CHECK_FALSE(fs::exists(dir / "ft"));  // no run directory made for nothing
  }
}
