// A Llama-family decoder (Llama 2/3, SmolLM2, Qwen2, Mistral shapes): token embedding, blocks
// of pre-RMSNorm grouped-query attention with rotary embeddings (models/rotary.h) and a SwiGLU
// MLP, a final RMSNorm, and an output projection (tied to the embedding or its own). No biases
// but the optional q/k/v ones (Qwen2). The arithmetic follows Hugging Face transformers'
// LlamaForCausalLM / Qwen2ForCausalLM (RMSNorm in float32, angles in float32), so logits match
// it; the parameter names are transformers' without the leading "model.":
//   embed_tokens.weight, layers.0.input_layernorm.weight, layers.0.self_attn.{q,k,v,o}_proj.*,
//   layers.0.post_attention_layernorm.weight, layers.0.mlp.{gate,up,down}_proj.weight,
//   norm.weight, lm_head.weight (untied only).
// Blocks and their attention / MLP halves are frugal::Units: checkpointing, zero3 and offload
// apply as to the GPT.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>

#include "frugal/config/config.h"
#include "frugal/models/kernels.h"
#include "frugal/models/kv_cache.h"
#include "frugal/models/model.h"
#include "frugal/models/rotary.h"
#include "frugal/models/unit.h"

namespace frugal {

struct LlamaOptions {
  int64_t vocab_size = 32000;
  int64_t max_position = 2048;  // model.block_size
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_kv_head = 4;
  int64_t hidden = 256;         // model.n_embd
  int64_t intermediate = 688;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = true;
  bool qkv_bias = false;
  RopeOptions rope;             // head_dim = hidden / n_head
  Kernels kernels = Kernels::Auto;
  int64_t loss_chunk_tokens = 0;  // batch_loss_sum without whole logits (chunked_loss.h)

  int64_t head_dim() const { return hidden / n_head; }
  // Exact, from the shapes alone (an 8B preset is counted without building it).
  int64_t parameter_count() const;
  static LlamaOptions from(const ModelConfig& cfg);
};

// x / rms(x) * weight, computed in float32 and returned in the input's dtype.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// What the blocks of one batch with position ids or an attention mask read (UnitExtras, in
// this order): the rotary angles at the tokens' positions and which keys each query sees.
// Without either, the extras are empty: positions 0..T-1 and the causal kernels.
struct LlamaExtras {
  static constexpr size_t kCos = 0, kSin = 1, kMask = 2, kCount = 3;
  // cos / sin (B, 1, T, head_dim) float32; mask (B, 1, T, T) bool, true = attend: causal,
  // within the query's document (a position id that does not follow the previous one by one
  // starts one) and to real keys only. A
  // query always sees itself, so a padding row stays finite (its target is ignored anyway).
  static UnitExtras make(RotaryEmbedding& rope, const at::Tensor& idx, const at::Tensor& position_ids,
                         const at::Tensor& attention_mask);
};

class LlamaAttention : public Unit {
 public:
  LlamaAttention(const LlamaOptions& o, std::shared_ptr<RotaryEmbedding> rope);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  // (B, T, hidden) tokens after the cache's: their keys and values go into `layer` of it.
  // cos / sin: the rotary angles at their positions (RotaryEmbedding::cos_sin_at).
  at::Tensor forward_cached(const at::Tensor& x, KvCache& cache, size_t layer,
                            const at::Tensor& cos, const at::Tensor& sin);

 protected:
  // (B, T, hidden) -> (B, T, hidden); extras: empty or LlamaExtras.
  at::Tensor forward_impl_extras(const at::Tensor& x, const UnitExtras& extras) override;

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  Kernels kernels_;
  std::shared_ptr<RotaryEmbedding> rope_;
};

class LlamaMlp : public Unit {
 public:
  explicit LlamaMlp(const LlamaOptions& o);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 protected:
  at::Tensor forward_impl(const at::Tensor& x) override;  // down(silu(gate(x)) * up(x))
};

class LlamaBlock : public Unit {
 public:
  LlamaBlock(const LlamaOptions& o, std::shared_ptr<RotaryEmbedding> rope);
  RmsNorm input_layernorm{nullptr};
  std::shared_ptr<LlamaAttention> self_attn;
  RmsNorm post_attention_layernorm{nullptr};
  std::shared_ptr<LlamaMlp> mlp;
  at::Tensor forward_cached(const at::Tensor& x, KvCache& cache, size_t layer,
                            const at::Tensor& cos, const at::Tensor& sin);

 protected:
  // The extras go on to the attention.
  at::Tensor forward_impl_extras(const at::Tensor& x, const UnitExtras& extras) override;
};

class Llama : public Model, public CachedDecoder {
 public:
  explicit Llama(const LlamaOptions& o);
  at::Tensor forward(const at::Tensor& idx) override;  // (B, T) int64 -> (B, T, vocab) logits
  // With position ids and / or an attention mask, (B, T) int64 each or undefined, as
  // transformers' LlamaForCausalLM takes them (see Batch).
  at::Tensor forward(const at::Tensor& idx, const at::Tensor& position_ids,
                     const at::Tensor& attention_mask);
  at::Tensor forward_batch(const Batch& batch) override;
  // The final RMSNorm's output (B, T, hidden): what the output projection reads.
  at::Tensor hidden_states(const at::Tensor& idx, const at::Tensor& position_ids,
                           const at::Tensor& attention_mask);
  at::Tensor batch_loss_sum(const Batch& batch) override;
  // 6N + 12 L (n_head x head_dim) T: N without the input embedding when it is only looked up
  // (untied).
  double flops_per_token(int64_t seq_len) const override;
  std::vector<std::string> block_lists() const override { return {"layers"}; }
  const LlamaOptions& options() const { return options_; }

  // Incremental decoding (kv_cache.h). The blocks are called directly, past any strategy's
  // wrappers: for a whole model in eval mode, as `frugal generate` loads one.
  KvCache make_cache(int64_t batch, int64_t capacity,
                     const at::TensorOptions& options) const override;
  at::Tensor forward_cached(const at::Tensor& idx, KvCache& cache) override;
  int64_t max_sequence() const override { return options_.max_position; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied

 private:
  LlamaOptions options_;
  std::shared_ptr<RotaryEmbedding> rope_;  // shared by the blocks
};

}  // namespace frugal
