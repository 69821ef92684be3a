// Parity with Hugging Face transformers (tests/python/llama_reference.py): a small random
// Llama (GQA, Llama 3.1's rope scaling, untied output) and a small random Qwen2 (q/k/v
// biases, tied), built and saved by transformers, loaded by frugal from the folder: logits
// within 1e-5 (fp32), every gradient within 1e-5, and 20 fine-tuning steps (AdamW, cosine,
// clipping) whose losses stay within 1e-4 of transformers' in a Python loop over the same
// batches.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frugal/engine/engine.h"
#include "frugal/hf/folder.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;

TEST_CASE("llama and qwen2 from transformers folders: logits, gradients, fine-tuning",
          "[integration][python][llama]") {
  for (const std::string arch : {"llama", "qwen2"}) {
    SECTION(arch) {
      test::TempDir dir("frugal-hf-" + arch);
      auto r =
          test::python_script("llama_reference.py", test::quote(dir.path().string()) + " " + arch);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);

      const ModelConfig mc = hf::read_model_config(dir / "hf");
      CHECK(mc.n_kv_head == 2);
      CHECK(mc.qkv_bias == (arch == "qwen2"));
      CHECK(mc.tie_embeddings == (arch == "qwen2"));
      CHECK(mc.rope_scaling == (arch == "llama" ? "llama3" : "none"));
      auto model = make_model(mc);
      hf::load_weights(*model, dir / "hf");

      std::map<std::string, at::Tensor> batches, ref;
      for (auto& [k, v] : io::read_safetensors(dir / "batches.safetensors")) batches[k] = v;
      for (auto& [k, v] : io::read_safetensors(dir / "reference.safetensors")) ref[k] = v;
      {
        INFO("logits and gradients of batch 0");
        const at::Tensor x = batches.at("x.0"), y = batches.at("y.0");
        at::Tensor logits = model->forward(x);
        const double logit_diff = (logits - ref.at("logits")).abs().max().item<double>();
        std::cout << arch << ": logits max |diff| " << logit_diff << "\n";
        CHECK(logit_diff < 1e-5);
        (model->loss_sum(logits, y) / static_cast<double>(y.numel())).backward();
        int64_t compared = 0;
        double worst_grad = 0.0;
        for (const auto& p : model->named_parameters()) {
          INFO(p.key());
          const std::string hf_name = p.key() == "lm_head.weight" ? p.key() : "model." + p.key();
          REQUIRE(ref.count("grad." + hf_name) == 1);
          const double d = (p.value().grad() - ref.at("grad." + hf_name)).abs().max().item<double>();
          worst_grad = std::max(worst_grad, d);
          CHECK(d < 1e-5);
          ++compared;
        }
        CHECK(compared == static_cast<int64_t>(model->parameters().size()));
        std::cout << arch << ": gradients max |diff| " << worst_grad << "\n";
        model->zero_grad();
      }
      {
        INFO("20 fine-tuning steps");
        const auto setup = nlohmann::json::parse(test::read_text(dir / "reference.json"));
        OptimConfig oc;
        oc.type = "adamw";
        oc.lr = setup["optim"]["lr"].get<double>();
        oc.betas = {setup["optim"]["betas"][0].get<double>(), setup["optim"]["betas"][1].get<double>()};
        oc.eps = setup["optim"]["eps"].get<double>();
        oc.weight_decay = setup["optim"]["weight_decay"].get<double>();
        oc.clip_grad_norm = setup["optim"]["clip_grad_norm"].get<double>();
        ScheduleConfig sc;
        sc.type = setup["schedule"]["type"].get<std::string>();
        sc.warmup_steps = setup["schedule"]["warmup_steps"].get<int64_t>();
        sc.min_lr = setup["schedule"]["min_lr"].get<double>();
        const int64_t steps = setup["steps"].get<int64_t>();
        Engine engine(EngineOptions{StrategyConfig{}, oc.clip_grad_norm});
        engine.setup(model, make_optimizer(oc, *model),
                     std::make_shared<LrSchedule>(sc, oc.lr, steps));
        const auto losses = setup["losses"].get<std::vector<double>>();
        REQUIRE(static_cast<int64_t>(losses.size()) == steps);
        double worst = 0.0;
        for (int64_t s = 0; s < steps; ++s) {
          Batch b{batches.at("x." + std::to_string(s)), batches.at("y." + std::to_string(s))};
          const StepStats st = engine.step(
              b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
          worst = std::max(worst, std::abs(st.loss - losses[s]));
        }
        std::cout << arch << ": 20 steps, largest loss difference " << worst << " (losses "
                  << losses.front() << " -> " << losses.back() << ")\n";
        CHECK(worst < 1e-4);
        CHECK(losses.back() < losses.front() - 0.1);  // it learned something
      }
    }
  }
}
