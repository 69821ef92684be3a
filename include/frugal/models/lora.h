// Low-rank adaptation (LoRA): a frozen linear layer W0 learns a low-rank update,
//   y = W0 x + b + scale * B A dropout(x),   scale = alpha / rank   (rsLoRA: alpha / sqrt(rank))
// with A (rank x in) initialised as PEFT does (Kaiming-uniform, a = sqrt(5)) and B (out x rank)
// zero, so training starts from the base model's outputs.
//
// apply_lora adds the adapter inside each matching torch::nn::Linear, as two child modules:
// its parameters are `<layer>.lora_A.weight` and `<layer>.lora_B.weight` (PEFT's names without
// the adapter's name), and the base weight keeps its name, so Hugging Face folders load into the
// model unchanged before or after. The adapter acts where the model calls frugal::linear(layer,
// x) (frugal/models/model.h), as the built-in models do; a user module that calls the layer
// directly must call frugal::linear instead, and check_lora_used says when one did not.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

namespace frugal {

struct LoraOptions {
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  // Layer names: a linear layer matches when its dotted name equals a target or ends with
  // "." + target ("q_proj" matches "layers.3.self_attn.q_proj"). "all-linear" = every linear
  // layer but the output head (`lm_head`), as PEFT's shorthand.
  std::vector<std::string> targets = {"q_proj", "v_proj"};
  bool rslora = false;  // scale = alpha / sqrt(rank) (rank-stabilised LoRA)

  double scale() const;
};

// The adapter's down projection A, and what the adapted forward needs: its scale and dropout.
class LoraDownImpl : public torch::nn::Module {
 public:
  LoraDownImpl(int64_t in, int64_t rank, double scale, double dropout);
  at::Tensor weight;  // (rank, in)
  double scale;
  double dropout;
  int64_t calls = 0;  // forwards through it (check_lora_used)
};

// The adapter of `layer`, or null when it has none.
LoraDownImpl* lora_down_of(const torch::nn::LinearImpl& layer);
torch::nn::LinearImpl* lora_up_of(const torch::nn::LinearImpl& layer);

// scale * B A dropout(x) for an adapted layer (dropout only in training).
at::Tensor lora_delta(const torch::nn::LinearImpl& layer, const at::Tensor& x);

// Every torch::nn::Linear of `module` with its dotted name, in registration order.
std::vector<std::pair<std::string, torch::nn::Linear>> linear_layers(torch::nn::Module& module);

// The linear layers `targets` names (as LoraOptions::targets), in registration order; targets
// that match nothing are a frugal::Error listing the linear layers' names, prefixed by `key`
// (the setting's name, e.g. "model.lora.targets").
std::vector<std::pair<std::string, torch::nn::Linear>> select_linear_layers(
    torch::nn::Module& module, const std::vector<std::string>& targets, const std::string& key);

// Adds an adapter to each linear layer of `module` that `options.targets` names and freezes every
// other parameter of `module` (PEFT's default: no bias trained). Returns the adapted layers'
// names. A rank or alpha <= 0, a dropout outside [0, 1) or targets that match no layer are a
// frugal::Error (the last lists the linear layers' names). `what` prefixes messages (the YAML
// key, e.g. "model.lora").
std::vector<std::string> apply_lora(torch::nn::Module& module, const LoraOptions& options,
                                    const std::string& what = "apply_lora");

// Freezes (requires_grad = false) every parameter whose dotted name matches one of `patterns`
// (shell wildcards: "embed_tokens.*", "layers.0.*"). A pattern matching nothing is a
// frugal::Error. Returns the frozen names.
std::vector<std::string> freeze_parameters(torch::nn::Module& module,
                                           const std::vector<std::string>& patterns,
                                           const std::string& what = "freeze");

// After a forward: a frugal::Error naming the first adapter that forward did not use (its
// module called the layer without frugal::linear), so an adapter is never silently idle.
void check_lora_used(torch::nn::Module& module);

// W0 + scale B A for each adapted layer, by the base weight's name ("<layer>.weight"): the
// merged model's weights.
std::vector<std::pair<std::string, at::Tensor>> merged_lora_weights(torch::nn::Module& module);

// Counts of trainable and frozen parameters (elements).
struct ParameterCounts {
  int64_t trainable = 0;
  int64_t frozen = 0;
};
ParameterCounts count_parameters(const torch::nn::Module& module);

}  // namespace frugal
