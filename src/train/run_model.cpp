#include "frugal/train/run_model.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <map>

#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/io/module_state.h"
#include "frugal/memory/meta_trace.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/models/registry.h"
#include "frugal/util/error.h"

namespace frugal {

std::shared_ptr<Model> build_run_model(const Config& cfg, const RunModelOptions& options) {
  // Seeded here, right before the model is made: its initial values (a random base's, the
  // adapters' A) depend on run.seed alone, whatever drew random numbers before.
  at::manual_seed(cfg.run.seed);
  const bool from_folder = options.load_init_from && !cfg.model.init_from.empty();
  const QuantizedLayers quantized = quantized_layers(cfg.model);
  std::shared_ptr<Model> model;
  if (options.on_meta) {
    memory::OnMetaDevice on_meta;
    model = make_model(cfg.model);
  } else if (from_folder && !quantized.targets.empty()) {
    // QLoRA from a folder: built on the meta device (no memory, no initialisation), then
    // loaded tensor by tensor with the NF4 layers quantized as they are read, so that the
    // full-precision base never exists on the host.
    {
      memory::OnMetaDevice on_meta;
      model = make_model(cfg.model);
    }
    hf::load_weights_quantized(*model, cfg.model.init_from, quantized.targets, quantized.key);
  } else {
    try {
      model = make_model(cfg.model);
    } catch (const c10::OutOfMemoryError& e) {
      // Sizes that validate but whose parameters this machine cannot hold: the config's
      // problem, said in the config's terms.
      throw Error(fmt::format("model: the {} model's parameters do not fit in memory ({}); "
                              "make the model smaller",
                              cfg.model.type, e.what_without_backtrace()));
    }
    if (from_folder) hf::load_weights(*model, cfg.model.init_from);
  }
  // Adapters and frozen parameters, on the loaded base.
  apply_finetuning(*model, cfg.model);
  if (options.load_init_adapter && !cfg.model.init_adapter.empty()) {
    hf::load_adapter(*model, cfg.model, cfg.model.init_adapter);
  }
  return model;
}

std::shared_ptr<Model> restore_run_model(const Config& cfg, const io::NamedTensors& saved,
                                         const std::string& what) {
  // The frozen base is not in the checkpoint: it comes from where the run took it (a plain
  // run's checkpoint holds every parameter, and the folder is not read).
  RunModelOptions o;
  o.load_init_from = finetuning(cfg.model);
  o.load_init_adapter = false;  // the checkpoint holds the adapters as trained
  auto model = build_run_model(cfg, o);
  io::load_module_state(*model, saved, what);
  return model;
}

io::NamedTensors merged_model_weights(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> merged;
  for (auto& [name, w] : merged_lora_weights(model)) merged.emplace(name, std::move(w));
  io::NamedTensors out;
  // Module by module, in registration order: an NF4 layer's weight (no longer a parameter)
  // takes the place the parameter had, before its bias.
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const std::string& prefix = item.key();
    const std::string last = prefix.substr(prefix.rfind('.') == std::string::npos ? 0 : prefix.rfind('.') + 1);
    if (last == "lora_A" || last == "lora_B" || last == "weight_nf4") continue;
    const std::string dot = prefix.empty() ? "" : prefix + ".";
    auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(item.value());
    if (linear && nf4_weight_of(*linear) && !merged.count(dot + "weight")) {
      // A quantized layer without an adapter (model.quantize_base.modules): dequantized.
      merged.emplace(dot + "weight", linear_weight(*linear, nf4_weight_of(*linear)->dtype));
    }
    if (linear && nf4_weight_of(*linear)) out.emplace_back(dot + "weight", merged.at(dot + "weight"));
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      const std::string name = dot + p.key();
      auto it = merged.find(name);
      out.emplace_back(name, it != merged.end() ? it->second : p.value().detach());
    }
  }
  for (const auto& b : model.named_buffers(/*recurse=*/true)) {
    if (b.key().find(".weight_nf4.") == std::string::npos) out.emplace_back(b.key(), b.value().detach());
  }
  return out;
}

}  // namespace frugal
