// Hugging Face model folders, as `save_pretrained` writes them: config.json (the
// architecture) and the weights in model.safetensors, or sharded with
// model.safetensors.index.json. frugal's Llama names its parameters as transformers does
// without the leading "model." (models/llama.h), so the weights map by name.
#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/hf_config.h"
#include "frugal/io/named_tensors.h"
#include "frugal/io/pending_tensors.h"
#include "frugal/strategy/state_dict.h"

namespace frugal::hf {

// The weights by frugal's names ("model." stripped), from model.safetensors or every shard the
// index lists, as read-only views of memory maps (io::map_safetensors: nothing is read until
// used). A folder without either is a frugal::Error naming it.
io::NamedTensors read_weights(const std::filesystem::path& dir);

// The architecture read from the folder's config.json (`model`) checked against the shapes of
// its weight files, reading only their headers, before a model of that size is built: a size
// the weights do not have (vocab_size, hidden_size, num_hidden_layers, intermediate_size,
// num_key_value_heads) is a frugal::Error naming config.json and the key, so that a file's
// claim is never allocated on its word alone.
void check_architecture(const ModelConfig& model, const std::filesystem::path& dir);

// What identifies a base model folder's contents: each weight file's and config.json's size and
// hash (whole files up to 64 MiB; larger ones by their head, tail and 256 blocks between).
// A fine-tuned run's checkpoints record it, and resuming on a folder that no longer matches is
// refused, naming the file.
std::map<std::string, std::string> folder_fingerprint(const std::filesystem::path& dir);

// Copies the folder's weights into `model`: every parameter must be there with its shape
// (converted to the parameter's dtype); a tied model ignores a saved lm_head.weight that
// equals the embedding. A missing or mis-shaped tensor, or one the model does not have, is a
// frugal::Error naming the folder and the tensor.
void load_weights(torch::nn::Module& model, const std::filesystem::path& dir);

// load_weights for a model built on the meta device (memory::OnMetaDevice), that quantizes as
// it loads: the weights of the linear layers `nf4_targets` names (quantize_linear_layers'
// targets; `key` names the setting in errors) are read chunk by chunk straight into NF4 (in the
// parameter's dtype, the bits quantize_linear_layers gives after load_weights), every other
// parameter into a tensor of its own on the CPU. The model is never whole at full precision:
// the host holds the loaded part plus one tensor in flight (QLoRA's base at its NF4 size).
// The same checks as load_weights, all made before anything is read.
void load_weights_quantized(torch::nn::Module& model, const std::filesystem::path& dir,
                            const std::vector<std::string>& nf4_targets, const std::string& key);

// The same weights, checked the same way, as a saved training state of whole tensors without
// optimizer state, for Engine::load_state_dict after setup: a sharding that keeps parameter
// shards (zero3) copies each rank's slice of every tensor out of the memory maps, so each rank
// reads only what it keeps.
std::unique_ptr<SavedState> weights_state(torch::nn::Module& model, const std::filesystem::path& dir);

// transformers' names and layouts for a model's tensors (frugal names in), by the type's
// Hugging Face mapping (ModelSpec::hf): llama adds "model." (lm_head.weight stays); gpt maps to
// GPT2LMHeadModel's ("transformer.h.0.attn.c_attn", its Conv1D weights transposed). A type
// without a mapping is a frugal::Error.
io::NamedTensors to_transformers(const ModelConfig& model, const io::NamedTensors& tensors);
// The same for tensors read when their turn comes (io/pending_tensors.h).
io::PendingTensors to_transformers(const ModelConfig& model, const io::PendingTensors& tensors);

// bos_token_id and eos_token_id as JSON values (a number, or a list as Llama 3.1's), empty
// when unknown.
struct TokenIds {
  std::string bos, eos;
};
// An export's special ids: those of the source folder's config.json (model.init_from), else
// eos as the end of text of the folder's tokenizer, else data.eot_token (>= 0).
TokenIds special_token_ids(const std::filesystem::path& source_dir, int64_t eot_token);
// The ids generation stops at, as transformers' generate on the same folder (or on an export
// of a run that started from it) stops: generation_config.json's eos_token_id when the folder
// has one, else special_token_ids' eos; empty when neither knows one.
std::vector<int64_t> stop_token_ids(const std::filesystem::path& source_dir, int64_t eot_token);

// Writes a folder transformers' from_pretrained loads: config.json (with `ids`), the weights in
// model.safetensors or, past max_shard_bytes, in model-0000k-of-0000n.safetensors with
// model.safetensors.index.json, the tokenizer files found in `tokenizer_dir` (if given), and
// its generation_config.json, else one with `ids` (when an eos is known).
// Built in a temporary folder and published with one rename; an existing `out` is refused.
void write_folder(const std::filesystem::path& out, const ModelConfig& model,
                  const io::NamedTensors& tensors, int64_t max_shard_bytes,
                  const std::filesystem::path& tokenizer_dir = {}, const TokenIds& ids = {});
// The same, each tensor read when written and let go: the folder's writer holds one tensor
// at a time (`frugal export` of a checkpoint).
void write_folder(const std::filesystem::path& out, const ModelConfig& model,
                  const io::PendingTensors& tensors, int64_t max_shard_bytes,
                  const std::filesystem::path& tokenizer_dir = {}, const TokenIds& ids = {});

}  // namespace frugal::hf
