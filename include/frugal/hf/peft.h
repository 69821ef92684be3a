// PEFT's LoRA adapter folders, as `PeftModel.save_pretrained` writes them and
// `PeftModel.from_pretrained(base, folder)` reads them (PEFT 0.21):
//   adapter_config.json        peft_type LORA, r, lora_alpha, lora_dropout, target_modules,
//                              use_rslora, bias "none", task_type CAUSAL_LM, ...
//   adapter_model.safetensors  "base_model.model.<transformers name>.lora_A.weight" (r x in) and
//                              ".lora_B.weight" (out x r): the adapter's name ("default") is not
//                              in the saved names
// frugal's adapters are `<layer>.lora_A.weight` / `<layer>.lora_B.weight` under frugal's names
// (frugal/models/lora.h); the transformers name of a layer is hf::to_transformers' (a Llama's
// "model." prefix, GPT-2's Conv1D names).
#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <string>

#include "frugal/config/config.h"
#include "frugal/io/named_tensors.h"

namespace frugal::hf {

// PEFT's saved name of a frugal adapter tensor ("layers.0.self_attn.q_proj.lora_A.weight" ->
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
std::string peft_name(const ModelConfig& model, const std::string& name);

// Writes an adapter folder PEFT loads: adapter_config.json from model.lora (target_modules as
// the adapted layers' short names, e.g. ["q_proj", "v_proj"], or their whole transformers
// names where model.lora.targets names layers by a dotted path; base_model_name_or_path =
// model.init_from when set) and adapter_model.safetensors from `adapters`, the lora_A / lora_B
// tensors under frugal's names. Built in a temporary folder and published with one rename; an
// existing `out`, no adapter tensor, or a model type without a transformers layout is a
// frugal::Error.
void write_adapter_folder(const std::filesystem::path& out, const ModelConfig& model,
                          const io::NamedTensors& adapters);

// adapter_config.json of the folder `dir` checked against model.lora, before any model is
// built: a LoRA adapter (peft_type LORA, no DoRA, bias "none", one rank and alpha for every
// layer, no modules_to_save) whose r, lora_alpha and use_rslora equal model.lora's rank,
// alpha and rslora. Anything else is a frugal::Error of one line naming the file and the key.
void check_adapter_config(const ModelConfig& model, const std::filesystem::path& dir);

// Starts the adapters of `module` (apply_finetuning done: the adapters exist) from the folder
// (model.init_adapter): check_adapter_config, then its target_modules must select exactly the
// layers model.lora adapted, and adapter_model.safetensors must hold exactly their lora_A and
// lora_B tensors, each with the model's shape (converted to the adapter's dtype). A missing,
// extra or mis-shaped tensor is a frugal::Error naming it (and both shapes).
void load_adapter(torch::nn::Module& module, const ModelConfig& model,
                  const std::filesystem::path& dir);

}  // namespace frugal::hf
