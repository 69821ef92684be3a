// A decoder-only transformer (GPT-2 shape): token + position embeddings, pre-LayerNorm blocks
// of causal self-attention (frugal/models/causal_attention.h) and a GELU MLP, a final LayerNorm,
// and an output projection tied to the token embedding. Parameter names follow what the same
// model written in PyTorch would produce: tok_emb.weight, pos_emb.weight,
// blocks.0.ln1.weight, blocks.0.attn.qkv.weight, blocks.0.attn.proj.weight, blocks.0.ln2.*,
// blocks.0.mlp.fc.*, blocks.0.mlp.proj.*, ln_f.*.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "frugal/config/config.h"
#include "frugal/models/kernels.h"
#include "frugal/models/kv_cache.h"
#include "frugal/models/model.h"
#include "frugal/models/unit.h"

namespace frugal {

struct GptOptions {
  int64_t vocab_size = 256;
  int64_t block_size = 128;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = true;
  Kernels kernels = Kernels::Auto;  // attention (frugal/models/kernels.h)
  int64_t loss_chunk_tokens = 0;    // batch_loss_sum without whole logits (chunked_loss.h)

  static GptOptions from(const ModelConfig& cfg);
  // For models built in code: the sizes in one call.
  static GptOptions sized(int64_t vocab_size, int64_t block_size, int64_t n_layer, int64_t n_head,
                          int64_t n_embd, double dropout = 0.0);
};

// The block and its two halves are Units, so checkpointing can wrap whole blocks or only
// their attention / MLP (policy selective); forward(x) (from Unit) runs forward_impl.
class CausalSelfAttention : public Unit {
 public:
  explicit CausalSelfAttention(const GptOptions& o);

  torch::nn::Linear qkv{nullptr};   // C -> 3C
  torch::nn::Linear proj{nullptr};  // C -> C
  torch::nn::Dropout resid_drop{nullptr};
  // (B, T, C) tokens after the cache's: their keys and values go into `layer` of it.
  at::Tensor forward_cached(const at::Tensor& x, KvCache& cache, size_t layer);

 protected:
  at::Tensor forward_impl(const at::Tensor& x) override;  // (B, T, C) -> (B, T, C)

 private:
  int64_t n_head_;
  double dropout_;
  Kernels kernels_;
};

class GptMlp : public Unit {
 public:
  explicit GptMlp(const GptOptions& o);

  torch::nn::Linear fc{nullptr};    // C -> 4C
  torch::nn::Linear proj{nullptr};  // 4C -> C
  torch::nn::Dropout drop{nullptr};

 protected:
  at::Tensor forward_impl(const at::Tensor& x) override;  // (B, T, C) -> (B, T, C)
};

class GptBlock : public Unit {
 public:
  explicit GptBlock(const GptOptions& o);

  torch::nn::LayerNorm ln1{nullptr};
  std::shared_ptr<CausalSelfAttention> attn;
  torch::nn::LayerNorm ln2{nullptr};
  std::shared_ptr<GptMlp> mlp;
  at::Tensor forward_cached(const at::Tensor& x, KvCache& cache, size_t layer);

 protected:
  at::Tensor forward_impl(const at::Tensor& x) override;  // x + attn(ln1(x)); x + mlp(ln2(x))
};

class Gpt : public Model, public CachedDecoder {
 public:
  explicit Gpt(const GptOptions& o);
  at::Tensor forward(const at::Tensor& idx) override;  // (B, T) int64 -> (B, T, vocab) logits
  // The final layer norm's output (B, T, C): what the tied output projection reads.
  at::Tensor hidden_states(const at::Tensor& idx);
  at::Tensor batch_loss_sum(const Batch& batch) override;
  // 6N + 12 L C T (PaLM's count): N without the position table, which is only looked up.
  double flops_per_token(int64_t seq_len) const override;
  std::vector<std::string> block_lists() const override { return {"blocks"}; }

  // Autoregressive sampling: idx (1, T0) -> (1, T0 + new_tokens). temperature > 0;
  // top_k 0 = the full distribution. Runs in eval mode without gradients.
  at::Tensor generate(at::Tensor idx, int64_t new_tokens, double temperature, int64_t top_k,
                      at::Generator generator);

  const GptOptions& options() const { return options_; }

  // Incremental decoding (kv_cache.h), past any strategy's wrappers: for a whole model in
  // eval mode.
  KvCache make_cache(int64_t batch, int64_t capacity,
                     const at::TensorOptions& options) const override;
  at::Tensor forward_cached(const at::Tensor& idx, KvCache& cache) override;
  int64_t max_sequence() const override { return options_.block_size; }

  torch::nn::Embedding tok_emb{nullptr};
  torch::nn::Embedding pos_emb{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  void init_weights();
  GptOptions options_;
};

}  // namespace frugal
