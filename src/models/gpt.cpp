#include "frugal/models/gpt.h"

#include <ATen/ATen.h>
#include <ATen/ops/linear.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>

#include "frugal/data/batch.h"
#include "frugal/models/causal_attention.h"
#include "frugal/models/chunked_loss.h"
#include "frugal/models/generate.h"
#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal {

GptOptions GptOptions::from(const ModelConfig& c) {
  GptOptions o;
  o.vocab_size = c.vocab_size;
  o.block_size = c.block_size;
  o.n_layer = c.n_layer;
  o.n_head = c.n_head;
  o.n_embd = c.n_embd;
  o.dropout = c.dropout;
  o.bias = c.bias;
  o.kernels = parse_kernels(c.kernels, "model.kernels");
  o.loss_chunk_tokens = c.loss_chunk_tokens;
  if (o.n_embd % o.n_head != 0) {
    throw Error("model: n_embd (" + std::to_string(o.n_embd) + ") must be divisible by n_head (" +
                std::to_string(o.n_head) + ")");
  }
  return o;
}

GptOptions GptOptions::sized(int64_t vocab_size, int64_t block_size, int64_t n_layer,
                             int64_t n_head, int64_t n_embd, double dropout) {
  GptOptions o;
  o.vocab_size = vocab_size;
  o.block_size = block_size;
  o.n_layer = n_layer;
  o.n_head = n_head;
  o.n_embd = n_embd;
  o.dropout = dropout;
  return o;
}

CausalSelfAttention::CausalSelfAttention(const GptOptions& o)
    : n_head_(o.n_head), dropout_(o.dropout), kernels_(o.kernels) {
  qkv = register_module("qkv",
                        torch::nn::Linear(torch::nn::LinearOptions(o.n_embd, 3 * o.n_embd).bias(o.bias)));
  proj = register_module("proj",
                         torch::nn::Linear(torch::nn::LinearOptions(o.n_embd, o.n_embd).bias(o.bias)));
  resid_drop = register_module("resid_drop", torch::nn::Dropout(o.dropout));
}

at::Tensor CausalSelfAttention::forward_impl(const at::Tensor& x) {
  at::Tensor y = causal_self_attention(linear(qkv, x), n_head_, is_training() ? dropout_ : 0.0,
                                       kernels_);  // (B, T, C)
  return resid_drop->forward(linear(proj, y));
}

at::Tensor CausalSelfAttention::forward_cached(const at::Tensor& x, KvCache& cache, size_t layer) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / n_head_;
  const auto parts = linear(qkv, x).split(C, /*dim=*/2);
  auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head_, D}).transpose(1, 2); };
  auto [keys, values] = cache.append(layer, heads(parts[1]), heads(parts[2]));
  const at::Tensor y = attend_cached(heads(parts[0]), keys, values, cache.length());
  return linear(proj, y.transpose(1, 2).reshape({B, T, C}));
}

GptMlp::GptMlp(const GptOptions& o) {
  fc = register_module("fc",
                       torch::nn::Linear(torch::nn::LinearOptions(o.n_embd, 4 * o.n_embd).bias(o.bias)));
  proj = register_module("proj",
                         torch::nn::Linear(torch::nn::LinearOptions(4 * o.n_embd, o.n_embd).bias(o.bias)));
  drop = register_module("drop", torch::nn::Dropout(o.dropout));
}

at::Tensor GptMlp::forward_impl(const at::Tensor& x) {
  // tanh-approximated GELU, as GPT-2 used.
  return drop->forward(linear(proj, at::gelu(linear(fc, x), "tanh")));
}

GptBlock::GptBlock(const GptOptions& o) {
  auto ln = [&] {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.n_embd}).elementwise_affine(true));
  };
  ln1 = register_module("ln1", ln());
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(o));
  ln2 = register_module("ln2", ln());
  mlp = register_module("mlp", std::make_shared<GptMlp>(o));
}

at::Tensor GptBlock::forward_impl(const at::Tensor& x) {
  at::Tensor h = x + attn->forward(ln1->forward(x));
  return h + mlp->forward(ln2->forward(h));
}

at::Tensor GptBlock::forward_cached(const at::Tensor& x, KvCache& cache, size_t layer) {
  at::Tensor h = x + attn->forward_cached(ln1->forward(x), cache, layer);
  return h + mlp->forward(ln2->forward(h));
}

Gpt::Gpt(const GptOptions& o) : options_(o) {
  tok_emb = register_module("tok_emb", torch::nn::Embedding(o.vocab_size, o.n_embd));
  pos_emb = register_module("pos_emb", torch::nn::Embedding(o.block_size, o.n_embd));
  drop = register_module("drop", torch::nn::Dropout(o.dropout));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.n_layer; ++i) blocks->push_back(std::make_shared<GptBlock>(o));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.n_embd})));
  init_weights();
}

void Gpt::init_weights() {
  // GPT-2's scheme: N(0, 0.02) for matrices and embeddings, zero biases, and the residual
  // projections scaled by 1/sqrt(2 * n_layer) so the residual stream's variance stays put.
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.n_layer));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool is_norm = name.find("ln") != std::string::npos;
    if (is_norm) {
      if (is_bias) p.zero_(); else p.fill_(1.0);
    } else if (is_bias) {
      p.zero_();
    } else {
      const bool residual = name.find(".proj.weight") != std::string::npos;
      p.normal_(0.0, residual ? residual_std : 0.02);
    }
  }
}

at::Tensor Gpt::forward(const at::Tensor& idx) {
  // Output projection tied to the token embedding: no separate lm_head parameter.
  return at::linear(autocast_meta_input(hidden_states(idx)),
                    autocast_meta_input(tok_emb->weight));  // (B, T, vocab)
}

at::Tensor Gpt::batch_loss_sum(const Batch& batch) {
  // (A batch with a mask or positions goes the default way, which refuses it.)
  if (options_.loss_chunk_tokens <= 0 || batch.attention_mask.defined() ||
      batch.position_ids.defined()) {
    return Model::batch_loss_sum(batch);
  }
  const at::Tensor h = hidden_states(batch.x);
  return chunked_linear_cross_entropy(h.reshape({-1, h.size(-1)}), tok_emb->weight,
                                      batch.y.reshape({-1}), options_.loss_chunk_tokens);
}

double Gpt::flops_per_token(int64_t seq_len) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  n -= pos_emb->weight.numel();
  return 6.0 * static_cast<double>(n) +
         12.0 * static_cast<double>(options_.n_layer * options_.n_embd * seq_len);
}

at::Tensor Gpt::hidden_states(const at::Tensor& idx) {
  const int64_t T = idx.size(1);
  if (T > options_.block_size) {
    throw Error("model: sequence length " + std::to_string(T) + " exceeds block_size " +
                std::to_string(options_.block_size));
  }
  at::Tensor pos = at::arange(T, idx.options().dtype(at::kLong));  // (T)
  at::Tensor x = drop->forward(tok_emb->forward(idx) + pos_emb->forward(pos));  // (B, T, C)
  for (const auto& block : *blocks) x = block->as<GptBlock>()->forward(x);
  return ln_f->forward(x);
}

at::Tensor Gpt::generate(at::Tensor idx, int64_t new_tokens, double temperature, int64_t top_k,
                         at::Generator generator) {
  return sample_tokens(*this, std::move(idx),
                       SamplingOptions{new_tokens, temperature, top_k, options_.block_size, {}},
                       std::move(generator));
}

KvCache Gpt::make_cache(int64_t batch, int64_t capacity, const at::TensorOptions& options) const {
  return KvCache(options_.n_layer, batch, options_.n_head, capacity,
                 options_.n_embd / options_.n_head, options);
}

at::Tensor Gpt::forward_cached(const at::Tensor& idx, KvCache& cache) {
  const int64_t T = idx.size(1), past = cache.length();
  if (past + T > options_.block_size) {
    throw Error("model: sequence length " + std::to_string(past + T) + " exceeds block_size " +
                std::to_string(options_.block_size));
  }
  const at::Tensor pos = at::arange(past, past + T, idx.options().dtype(at::kLong));
  at::Tensor x = tok_emb->forward(idx) + pos_emb->forward(pos);  // (B, T, C)
  for (size_t i = 0; i < blocks->size(); ++i) {
    x = blocks[i]->as<GptBlock>()->forward_cached(x, cache, i);
  }
  cache.advance(T);
  return at::linear(ln_f->forward(x), tok_emb->weight);
}

}  // namespace frugal
