#include "frugal/hf/peft.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "frugal/hf/folder.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/finetune.h"
#include "frugal/models/lora.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::hf {
namespace {

constexpr const char* kPeftPrefix = "base_model.model.";
constexpr const char* kAdapterConfig = "adapter_config.json";
constexpr const char* kAdapterWeights = "adapter_model.safetensors";

bool peft_ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string peft_strip(const std::string& s, const std::string& tail) {
  return s.substr(0, s.size() - tail.size());
}

// transformers' name of one of the model's tensors, by its type's Hugging Face mapping
// (peft_check_layout has checked that there is one).
HfTensorName peft_hf_name(const ModelConfig& model, const std::string& name) {
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  if (!spec || !spec->hf.tensor_name)
    throw Error(fmt::format("model.type {} has no transformers layout", model.type));
  return spec->hf.tensor_name(model, name);
}

// transformers' name of a frugal module (a layer), through its weight's name.
std::string peft_module_name(const ModelConfig& model, const std::string& layer) {
  return peft_strip(peft_hf_name(model, layer + ".weight").name, ".weight");
}

std::string peft_last_part(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

void peft_check_layout(const ModelConfig& model, const std::string& what) {
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  if (!spec || !spec->hf.tensor_name) {
    throw Error(fmt::format("{}: model.type {} has no transformers layout (PEFT adapters are "
                            "for types with a Hugging Face mapping, such as llama and gpt)",
                            what, model.type));
  }
}

// PEFT's test of a module name against target_modules given as a list: the name, or its last
// parts after a dot.
bool peft_suffix_match(const std::string& name, const std::string& target) {
  return name == target || peft_ends_with(name, "." + target);
}

// The layers a target_modules (or exclude_modules) value selects among `names`, as PEFT does:
// a list by suffix, a string as a regular expression matching the whole name, "all-linear"
// every linear layer but the output head.
std::set<std::string> peft_selected(const json_input::Node& node,
                                    const std::vector<std::string>& names) {
  std::set<std::string> out;
  if (node.value().is_string()) {
    const std::string pattern = node.string();
    std::string lower = pattern;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "all-linear") {
      for (const auto& n : names) {
        if (n != "lm_head" && !peft_ends_with(n, ".lm_head")) out.insert(n);
      }
      return out;
    }
    std::regex re;
    try {
      re = std::regex(pattern);
    } catch (const std::regex_error&) {
      node.fail(fmt::format("{} is not a regular expression frugal can read",
                            json_input::describe(node.value())));
    }
    for (const auto& n : names) {
      if (std::regex_match(n, re)) out.insert(n);
    }
    return out;
  }
  const json& list = node.array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string target = node.item(i).string();
    for (const auto& n : names) {
      if (peft_suffix_match(n, target)) out.insert(n);
    }
  }
  return out;
}

std::string peft_number(double v) {
  return fmt::format("{}", v);
}

// The parsed adapter_config.json, checked against model.lora.
struct PeftAdapterConfig {
  json doc;
  std::string file;
};

PeftAdapterConfig peft_read_config(const ModelConfig& model, const fs::path& dir) {
  const fs::path file = dir / kAdapterConfig;
  if (!fs::is_directory(dir)) {
    throw Error(fmt::format("model.init_adapter: '{}' is not a folder (a PEFT adapter folder: "
                            "{}, {})",
                            dir.string(), kAdapterConfig, kAdapterWeights));
  }
  if (!fs::exists(file)) {
    throw Error(fmt::format("model.init_adapter: '{}' has no {} (a PEFT adapter folder, as "
                            "save_pretrained writes it)",
                            dir.string(), kAdapterConfig));
  }
  PeftAdapterConfig c{json_input::parse_file(file, json_input::kConfigMaxBytes), file.string()};
  const json_input::Node j(c.doc, c.file);
  j.object();
  const std::string type = j.string_or("peft_type", "LORA");
  if (type != "LORA") {
    j.at("peft_type").fail(fmt::format("'{}': frugal reads LoRA adapters only (LORA)", type));
  }
  const int64_t r = j.at("r").integer(1, int64_t{1} << 24);
  if (r != model.lora.rank) {
    j.at("r").fail(fmt::format("{} here, model.lora.rank is {}", r, model.lora.rank));
  }
  const double alpha = j.at("lora_alpha").number(-1e300, 1e300);
  if (std::abs(alpha - model.lora.alpha) > 1e-12 * std::max(1.0, std::abs(alpha))) {
    j.at("lora_alpha").fail(fmt::format("{} here, model.lora.alpha is {}", peft_number(alpha),
                                        peft_number(model.lora.alpha)));
  }
  const bool rslora = j.boolean_or("use_rslora", false);
  if (rslora != model.lora.rslora) {
    j.at("use_rslora").fail(fmt::format("{} here, model.lora.rslora is {}", rslora,
                                        model.lora.rslora));
  }
  if (j.boolean_or("use_dora", false)) {
    j.at("use_dora").fail("true (DoRA): frugal's adapters are plain LoRA");
  }
  const std::string bias = j.string_or("bias", "none");
  if (bias != "none") {
    j.at("bias").fail(fmt::format("'{}': frugal's adapters train no bias (bias: none)", bias));
  }
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (auto p = j.find(key); p && !p->object().empty()) {
      p->fail("per-layer ranks and alphas are not supported (one model.lora.rank and alpha)");
    }
  }
  if (auto p = j.find("layers_to_transform")) {
    p->fail("adapters on some layers only are not supported (give the layers in target_modules)");
  }
  if (auto p = j.find("modules_to_save"); p && !(p->value().is_array() && p->value().empty())) {
    p->fail("fully trained modules beside the adapters are not supported");
  }
  j.at("target_modules");  // present, read against the model's layers by load_adapter
  return c;
}

}  // namespace

std::string peft_name(const ModelConfig& model, const std::string& name) {
  return kPeftPrefix + peft_hf_name(model, name).name;
}

void write_adapter_folder(const fs::path& out, const ModelConfig& model,
                          const io::NamedTensors& adapters) {
  const std::string what = "export --format peft";
  peft_check_layout(model, what);
  if (fs::exists(out)) {
    throw Error(fmt::format("export: '{}' already exists (pass --overwrite to replace it)",
                            out.string()));
  }
  // The adapted layers, in the adapters' order, and the tensors under PEFT's names.
  std::vector<std::string> layers;
  io::NamedTensors named;
  for (const auto& [name, t] : adapters) {
    std::string layer;
    if (peft_ends_with(name, ".lora_A.weight")) {
      layer = peft_strip(name, ".lora_A.weight");
    } else if (peft_ends_with(name, ".lora_B.weight")) {
      layer = peft_strip(name, ".lora_B.weight");
    } else {
      throw Error(fmt::format("{}: '{}' is not a LoRA adapter tensor", what, name));
    }
    if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layers.push_back(layer);
    named.emplace_back(peft_name(model, name), t);
  }
  if (layers.empty()) throw Error(what + ": no LoRA adapter to write");
  // target_modules: the short names where model.lora.targets are short names (or all-linear):
  // PEFT then selects exactly the same layers; else each adapted layer's whole name.
  const std::vector<std::string> targets = lora_targets(model);
  const bool short_names = std::none_of(targets.begin(), targets.end(), [](const std::string& t) {
    return t.find('.') != std::string::npos;
  });
  std::set<std::string> modules;
  for (const auto& layer : layers) {
    const std::string full = peft_module_name(model, layer);
    modules.insert(short_names ? peft_last_part(full) : full);
  }
  // GPT-2's Conv1D layers store (in, out) weights: the adapters follow the base's layout.
  const bool fan_in_fan_out = peft_hf_name(model, layers.front() + ".weight").transposed;
  const json alpha = model.lora.alpha == std::floor(model.lora.alpha) && std::abs(model.lora.alpha) < 1e15
                         ? json(static_cast<int64_t>(model.lora.alpha))
                         : json(model.lora.alpha);
  const json config = {
      {"alpha_pattern", json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", model.init_from.empty() ? json(nullptr) : json(model.init_from)},
      {"bias", "none"},
      {"exclude_modules", nullptr},
      {"fan_in_fan_out", fan_in_fan_out},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"lora_alpha", alpha},
      {"lora_bias", false},
      {"lora_dropout", model.lora.dropout},
      {"modules_to_save", nullptr},
      {"peft_type", "LORA"},
      {"r", model.lora.rank},
      {"rank_pattern", json::object()},
      {"revision", nullptr},
      {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", model.lora.rslora},
  };
  io::write_directory_atomic(out, [&](const fs::path& tmp) {
    io::write_file_atomic(tmp / kAdapterConfig, config.dump(2) + "\n");
    io::write_safetensors(tmp / kAdapterWeights, named, {{"format", "pt"}});
  });
}

void check_adapter_config(const ModelConfig& model, const fs::path& dir) {
  peft_read_config(model, dir);
}

void load_adapter(torch::nn::Module& module, const ModelConfig& model, const fs::path& dir) {
  peft_check_layout(model, "model.init_adapter");
  const PeftAdapterConfig c = peft_read_config(model, dir);
  const json_input::Node j(c.doc, c.file);

  // The model's linear layers by transformers name, and which model.lora adapted.
  std::vector<std::string> names;
  std::map<std::string, torch::nn::Linear> by_name;  // transformers name -> layer
  std::map<std::string, std::string> frugal_of;      // transformers name -> frugal name
  std::set<std::string> adapted;
  for (const auto& [name, layer] : linear_layers(module)) {
    const std::string t = peft_module_name(model, name);
    names.push_back(t);
    by_name.emplace(t, layer);
    frugal_of[t] = name;
    if (lora_down_of(*layer)) adapted.insert(t);
  }
  std::set<std::string> selected = peft_selected(j.at("target_modules"), names);
  if (auto ex = j.find("exclude_modules")) {
    for (const auto& n : peft_selected(*ex, names)) selected.erase(n);
  }
  const std::string targets = fmt::format("{}", fmt::join(lora_targets(model), ", "));
  for (const auto& n : names) {
    if (selected.count(n) && !adapted.count(n)) {
      j.at("target_modules").fail(fmt::format("adapts '{}', which model.lora.targets ({}) does not",
                                              n, targets));
    }
    if (!selected.count(n) && adapted.count(n)) {
      j.at("target_modules").fail(fmt::format("does not adapt '{}', which model.lora.targets "
                                              "({}) does",
                                              n, targets));
    }
  }

  // The tensors: every adapter of the model, under PEFT's names, and nothing else.
  struct Slot {
    at::Tensor param;
    std::string layer;
  };
  std::map<std::string, Slot> expected;
  std::vector<std::string> order;
  for (const auto& t : names) {
    if (!adapted.count(t)) continue;
    const auto& layer = by_name.at(t);
    const std::string frugal = frugal_of.at(t);
    for (const auto& [part, param] :
         {std::pair<const char*, at::Tensor>{".lora_A.weight", lora_down_of(*layer)->weight},
          std::pair<const char*, at::Tensor>{".lora_B.weight", lora_up_of(*layer)->weight}}) {
      const std::string key = peft_name(model, frugal + part);
      expected[key] = Slot{param, frugal};
      order.push_back(key);
    }
  }
  const fs::path file = dir / kAdapterWeights;
  if (!fs::exists(file)) {
    throw Error(fs::exists(dir / "adapter_model.bin")
                    ? fmt::format("model.init_adapter: '{}' holds adapter_model.bin (a pickle), "
                                  "which frugal does not read: save the adapter with "
                                  "safe_serialization=True ({})",
                                  dir.string(), kAdapterWeights)
                    : fmt::format("model.init_adapter: '{}' has no {}", dir.string(),
                                  kAdapterWeights));
  }
  const io::NamedTensors given = io::map_safetensors(file);
  std::set<std::string> seen;
  for (const auto& [key, t] : given) {
    auto it = expected.find(key);
    if (it == expected.end()) {
      throw Error(fmt::format("{}: '{}' is not an adapter of the model (its adapters: {} "
                              "tensors, e.g. '{}')",
                              file.string(), key, order.size(), order.front()));
    }
    if (t.sizes() != it->second.param.sizes()) {
      throw Error(fmt::format("{}: '{}' is {} in the adapter, {} in the model (an adapter for "
                              "another base model?)",
                              file.string(), key, fmt::join(t.sizes(), "x"),
                              fmt::join(it->second.param.sizes(), "x")));
    }
    if (!at::isFloatingType(t.scalar_type())) {
      throw Error(fmt::format("{}: '{}' is {}, not a floating-point tensor", file.string(), key,
                              c10::toString(t.scalar_type())));
    }
    seen.insert(key);
  }
  for (const auto& key : order) {
    if (!seen.count(key)) {
      throw Error(fmt::format("{}: no tensor '{}' (the adapter of '{}')", file.string(), key,
                              expected.at(key).layer));
    }
  }
  torch::NoGradGuard no_grad;
  for (const auto& [key, t] : given) expected.at(key).param.copy_(t);
}

}  // namespace frugal::hf
