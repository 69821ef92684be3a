// QLoRA from a Hugging Face folder: the model is built on the meta device and loaded tensor by
// tensor, each NF4 target quantized chunk by chunk straight from the memory-mapped file (bf16
// here, quantized in fp32). Checked against the plain path (a full fp32 model loaded, then
// quantized): the same NF4 codes and scales bit for bit, the same other parameters and logits,
// and a peak of host memory while loading within 1.2x the loaded model plus its largest tensor,
// where the plain path holds the whole fp32 base.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <map>

#include "frugal/config/hf_config.h"
#include "frugal/hf/folder.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/stats.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/models/registry.h"
#include "frugal/train/run_model.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace qlora_load_test {

// A Llama whose linear weights are multiples of NF4's 16384 values (q/o 512x512, k/v 256x512,
// MLP 2048x512), 8 layers: about 31M quantized weights, 4M more in the untied embedding and
// head, a bf16 folder of 71 MB.
ModelConfig folder_architecture() {
  ModelConfig mc = test::transformer_config("llama", 8, 8, 512, 64, 4096);
  mc.n_kv_head = 4;
  mc.intermediate_size = 2048;
  mc.tie_embeddings = false;
  return mc;
}

void write_random_folder(const std::filesystem::path& dir) {
  at::manual_seed(11);
  const ModelConfig mc = folder_architecture();
  auto model = make_model(mc);
  io::NamedTensors tensors;
  for (const auto& p : model->named_parameters()) {
    // Norm weights perturbed from their initial ones, so that a norm left uninitialised shows.
    at::Tensor t = p.value().dim() == 1 ? p.value() + 0.1 * at::randn_like(p.value()) : p.value();
    tensors.emplace_back(p.key(), t.detach().to(at::kBFloat16));
  }
  hf::write_folder(dir, mc, tensors, int64_t{1} << 40);
}

Config qlora_run(const std::filesystem::path& dir) {
  Config cfg;
  cfg.model = hf::read_model_config(dir);
  cfg.model.init_from = dir.string();
  cfg.model.lora.rank = 8;
  cfg.model.lora.alpha = 16;
  cfg.model.lora.targets = {"all-linear"};
  cfg.model.quantize_base.type = "nf4";
  cfg.model.quantize_base.modules = {"all-linear"};
  cfg.run.seed = 5;
  return cfg;
}

int64_t state_bytes(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += static_cast<int64_t>(p.nbytes());
  for (const auto& [name, layer] : linear_layers(model)) {
    if (const nf4::Nf4Weight* q = nf4_weight_of(*layer)) n += q->bytes();
  }
  return n;
}

TEST_CASE("qlora from a folder quantizes tensor by tensor, as the full load then quantize does",
          "[integration][qlora][hf][memory]") {
  memory::install_cpu_tracking();
  test::TempDir dir("frugal-qlora-load");
  const auto folder = dir / "base";
  write_random_folder(folder);
  const Config cfg = qlora_run(folder);
  const c10::Device cpu(c10::kCPU);

  // The quantizing load, measured.
  const int64_t before = memory::snapshot(cpu).allocated;
  memory::reset_peaks(cpu);
  auto loaded = build_run_model(cfg);
  const int64_t peak = memory::snapshot(cpu).allocated_peak - before;
  const int64_t held = memory::snapshot(cpu).allocated - before;

  int64_t largest = 0;  // the largest parameter at the model's fp32
  for (const auto& t : make_model(folder_architecture())->parameters()) {
    largest = std::max<int64_t>(largest, t.numel() * 4);
  }
  const int64_t bytes = state_bytes(*loaded);
  INFO("peak " << peak << " B, held " << held << " B, model state " << bytes
               << " B, largest tensor " << largest << " B");
  CHECK(held <= bytes + (int64_t{1} << 20));  // nothing left behind but the model
  CHECK(static_cast<double>(peak) <= 1.2 * static_cast<double>(bytes) + static_cast<double>(largest));

  // The plain path: fp32 model, whole folder loaded, then quantized (and its peak, for scale).
  memory::reset_peaks(cpu);
  const int64_t plain_before = memory::snapshot(cpu).allocated;
  at::manual_seed(cfg.run.seed);
  auto plain = make_model(cfg.model);
  hf::load_weights(*plain, folder);
  apply_finetuning(*plain, cfg.model);
  const int64_t plain_peak = memory::snapshot(cpu).allocated_peak - plain_before;
  WARN("loading the QLoRA base: tensor by tensor " << peak / 1e6 << " MB, full load then quantize "
       << plain_peak / 1e6 << " MB, model state " << bytes / 1e6 << " MB");
  CHECK(plain_peak > 3 * peak);

  // Bit for bit the same base.
  const auto plain_layers = linear_layers(*plain);
  const auto loaded_layers = linear_layers(*loaded);
  REQUIRE(plain_layers.size() == loaded_layers.size());
  int quantized = 0;
  for (size_t i = 0; i < plain_layers.size(); ++i) {
    INFO(plain_layers[i].first);
    REQUIRE(plain_layers[i].first == loaded_layers[i].first);
    const nf4::Nf4Weight* a = nf4_weight_of(*plain_layers[i].second);
    const nf4::Nf4Weight* b = nf4_weight_of(*loaded_layers[i].second);
    REQUIRE((a == nullptr) == (b == nullptr));
    if (a == nullptr) continue;
    ++quantized;
    CHECK(at::equal(a->codes, b->codes));
    CHECK(at::equal(a->scaler_codes, b->scaler_codes));
    CHECK(at::equal(a->scaler_factors, b->scaler_factors));
    CHECK(at::equal(a->scaler_mean, b->scaler_mean));
    CHECK(b->dtype == at::kFloat);
  }
  CHECK(quantized == 8 * 7);  // every block linear; the output head stays whole
  // The same parameters in the same order (the optimizer's and ZeRO's layouts), adapters
  // aside (their initial values follow the random numbers the fp32 base drew); then the
  // adapters copied across, the same logits.
  const auto pa = plain->named_parameters(), pb = loaded->named_parameters();
  REQUIRE(pa.size() == pb.size());
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].key());
    REQUIRE(pa[i].key() == pb[i].key());
    CHECK(pa[i].value().requires_grad() == pb[i].value().requires_grad());
    CHECK(pb[i].value().device().is_cpu());
    if (pa[i].key().find(".lora_") != std::string::npos) {
      pb[i].value().copy_(pa[i].value() + 0.01);
      pa[i].value().copy_(pb[i].value());
      continue;
    }
    CHECK(at::equal(pa[i].value(), pb[i].value()));
  }
  const at::Tensor x = at::randint(0, 4096, {2, 24}, at::kLong);
  CHECK(at::equal(plain->forward(x), loaded->forward(x)));
}

TEST_CASE("qlora from a folder checks everything before reading a tensor",
          "[integration][qlora][hf]") {
  test::TempDir dir("frugal-qlora-load-bad");
  const auto folder = dir / "base";
  write_random_folder(folder);
  Config cfg = qlora_run(folder);
  cfg.model.intermediate_size = 1024;  // the folder's MLP weights are 2048 wide
  CHECK_THROWS_WITH(build_run_model(cfg), Catch::Contains("mlp.gate_proj.weight' is 2048x512 in "
                                                          "the weights, 1024x512 in the model"));
  cfg = qlora_run(folder);
  cfg.model.quantize_base.modules = {"embed_tokens"};
  CHECK_THROWS_WITH(build_run_model(cfg), Catch::Contains("model.quantize_base.modules"));
}

}  // namespace qlora_load_test
