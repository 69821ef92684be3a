#include "frugal/models/llama.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include "frugal/data/batch.h"
#include "frugal/models/causal_attention.h"
#include "frugal/models/chunked_loss.h"
#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal {

LlamaOptions LlamaOptions::from(const ModelConfig& c) {
  LlamaOptions o;
  o.vocab_size = c.vocab_size;
  o.max_position = c.block_size;
  o.n_layer = c.n_layer;
  o.n_head = c.n_head;
  o.n_kv_head = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  o.hidden = c.n_embd;
  // Llama's rule when unset: 2/3 of 4 x hidden, rounded up to a multiple of 256.
  o.intermediate = c.intermediate_size > 0 ? c.intermediate_size
                                           : (8 * c.n_embd / 3 + 255) / 256 * 256;
  o.rms_norm_eps = c.rms_norm_eps;
  o.tie_embeddings = c.tie_embeddings;
  o.qkv_bias = c.qkv_bias;
  o.kernels = parse_kernels(c.kernels, "model.kernels");
  o.loss_chunk_tokens = c.loss_chunk_tokens;
  if (o.n_head < 1 || o.hidden % o.n_head != 0 || o.n_head % o.n_kv_head != 0) {
    throw Error("model: n_embd must be a multiple of n_head, and n_head of n_kv_head (got " +
                std::to_string(o.hidden) + ", " + std::to_string(o.n_head) + ", " +
                std::to_string(o.n_kv_head) + ")");
  }
  o.rope.head_dim = o.head_dim();
  o.rope.theta = c.rope_theta;
  o.rope.llama3_scaling = c.rope_scaling == "llama3";
  o.rope.factor = c.rope_factor;
  o.rope.low_freq_factor = c.rope_low_freq_factor;
  o.rope.high_freq_factor = c.rope_high_freq_factor;
  o.rope.original_max_position = c.rope_original_max_position;
  return o;
}

int64_t LlamaOptions::parameter_count() const {
  const int64_t q = n_head * head_dim(), kv = n_kv_head * head_dim();
  const int64_t attention = hidden * q + 2 * hidden * kv + q * hidden + (qkv_bias ? q + 2 * kv : 0);
  const int64_t mlp = 3 * hidden * intermediate;
  const int64_t block = attention + mlp + 2 * hidden;  // + the two norms
  return vocab_size * hidden * (tie_embeddings ? 1 : 2) + n_layer * block + hidden;
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  // In float32 whatever the activations' dtype (autocast would not promote a pow / mean).
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

namespace {
torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}
}  // namespace

LlamaAttention::LlamaAttention(const LlamaOptions& o, std::shared_ptr<RotaryEmbedding> rope)
    : n_head_(o.n_head), n_kv_head_(o.n_kv_head), head_dim_(o.head_dim()), kernels_(o.kernels),
      rope_(std::move(rope)) {
  q_proj = register_module("q_proj", make_linear(o.hidden, o.n_head * head_dim_, o.qkv_bias));
  k_proj = register_module("k_proj", make_linear(o.hidden, o.n_kv_head * head_dim_, o.qkv_bias));
  v_proj = register_module("v_proj", make_linear(o.hidden, o.n_kv_head * head_dim_, o.qkv_bias));
  o_proj = register_module("o_proj", make_linear(o.n_head * head_dim_, o.hidden, false));
}

UnitExtras LlamaExtras::make(RotaryEmbedding& rope, const at::Tensor& idx,
                             const at::Tensor& position_ids, const at::Tensor& attention_mask) {
  const int64_t B = idx.size(0), T = idx.size(1);
  for (const auto* t : {&position_ids, &attention_mask}) {
    if (t->defined() && t->sizes() != idx.sizes()) {
      throw Error("model: position ids and attention masks must have the shape of the tokens (" +
                  std::to_string(B) + ", " + std::to_string(T) + ")");
    }
  }
  const auto on = idx.options().dtype(at::kLong);
  const at::Tensor positions = position_ids.defined() ? position_ids.to(at::kLong)
                                                      : at::arange(T, on).expand({B, T});
  auto [cos, sin] = rope.cos_sin_at(positions);
  // Under autocast the queries and keys are in its dtype: round the angles to it once here,
  // not in every layer's rotation (where each copy would be saved until backward).
  if (const auto dtype = autocast_dtype(idx.device().type())) {
    cos = cos.to(*dtype);
    sin = sin.to(*dtype);
  }
  at::Tensor mask = at::ones({T, T}, on.dtype(at::kBool)).tril().expand({B, T, T});
  if (position_ids.defined()) {
    // A position that does not follow its predecessor by one starts a document, as
    // transformers finds packed sequences.
    const at::Tensor starts = positions.narrow(1, 1, T - 1) != positions.narrow(1, 0, T - 1) + 1;
    const at::Tensor document = at::cat({at::zeros({B, 1}, on), starts.to(at::kLong)}, 1).cumsum(1);
    mask = mask.logical_and(document.unsqueeze(2) == document.unsqueeze(1));
  }
  if (attention_mask.defined()) mask = mask.logical_and((attention_mask != 0).unsqueeze(1));
  mask = mask.logical_or(at::eye(T, on.dtype(at::kBool)));
  return {cos, sin, mask.unsqueeze(1)};
}

at::Tensor LlamaAttention::forward_impl_extras(const at::Tensor& x, const UnitExtras& extras) {
  if (!extras.empty() && extras.size() != LlamaExtras::kCount) {
    throw std::logic_error("LlamaAttention: extras are LlamaExtras::make's");
  }
  const int64_t B = x.size(0), T = x.size(1);
  // (B, T, heads * D) -> (B, heads, T, D); rotary embeddings on queries and keys.
  auto heads = [&](const at::Tensor& t, int64_t n) { return t.view({B, T, n, head_dim_}).transpose(1, 2); };
  auto rotary = [&](const at::Tensor& t) {
    return extras.empty() ? rope_->apply(t)
                          : RotaryEmbedding::rotate(t, extras[LlamaExtras::kCos], extras[LlamaExtras::kSin]);
  };
  at::Tensor q = rotary(heads(linear(q_proj, x), n_head_));
  at::Tensor k = rotary(heads(linear(k_proj, x), n_kv_head_));
  at::Tensor v = heads(linear(v_proj, x), n_kv_head_);
  // Each key/value head serves n_head / n_kv_head query heads; neither kernel below repeats
  // them (which would save n_head / n_kv_head copies of the keys and values for backward).
  at::Tensor y;
  const bool frugal = extras.empty() &&
                      (kernels_ == Kernels::Frugal ||
                       (kernels_ == Kernels::Auto && frugal_attention_available() &&
                        frugal_kernels_take(q)));
  if (frugal) {
    // frugal's CPU kernel is causal only and reads packed (B, T, C + 2 KV) rows.
    auto rows = [&](const at::Tensor& t) { return t.transpose(1, 2).reshape({B, T, -1}); };
    y = causal_self_attention(at::cat({rows(q), rows(k), rows(v)}, -1), n_head_, 0.0, kernels_,
                              n_kv_head_);  // (B, T, C)
  } else {
    // ATen's SDPA takes the heads as they are. No mask at all (not an undefined one) for the
    // causal case: SDPA's causal kernels, grouped-query attention inside them. Masked, the
    // key/value heads are repeated: with a mask, SDPA's grouped-query attention is only the
    // math kernel on CUDA (as transformers also decides).
    const std::optional<at::Tensor> mask =
        extras.empty() ? std::nullopt : std::optional<at::Tensor>(extras[LlamaExtras::kMask]);
    const int64_t group = n_head_ / n_kv_head_;
    if (mask && group > 1) {
      k = k.repeat_interleave(group, 1);
      v = v.repeat_interleave(group, 1);
    }
    y = at::scaled_dot_product_attention(autocast_meta_input(q), autocast_meta_input(k),
                                         autocast_meta_input(v), mask, /*dropout_p=*/0.0,
                                         /*is_causal=*/!mask.has_value(), /*scale=*/std::nullopt,
                                         /*enable_gqa=*/!mask && group > 1)
            .transpose(1, 2)
            .reshape({B, T, n_head_ * head_dim_});
  }
  return linear(o_proj, y);
}

at::Tensor LlamaAttention::forward_cached(const at::Tensor& x, KvCache& cache, size_t layer,
                                          const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1);
  auto heads = [&](const at::Tensor& t, int64_t n) {
    return t.view({B, T, n, head_dim_}).transpose(1, 2);
  };
  const at::Tensor q = RotaryEmbedding::rotate(heads(linear(q_proj, x), n_head_), cos, sin);
  const at::Tensor k = RotaryEmbedding::rotate(heads(linear(k_proj, x), n_kv_head_), cos, sin);
  auto [keys, values] = cache.append(layer, k, heads(linear(v_proj, x), n_kv_head_));
  const at::Tensor y = attend_cached(q, keys, values, cache.length());
  return linear(o_proj, y.transpose(1, 2).reshape({B, T, n_head_ * head_dim_}));
}

LlamaMlp::LlamaMlp(const LlamaOptions& o) {
  gate_proj = register_module("gate_proj", make_linear(o.hidden, o.intermediate, false));
  up_proj = register_module("up_proj", make_linear(o.hidden, o.intermediate, false));
  down_proj = register_module("down_proj", make_linear(o.intermediate, o.hidden, false));
}

at::Tensor LlamaMlp::forward_impl(const at::Tensor& x) {
  return linear(down_proj, at::silu(linear(gate_proj, x)) * linear(up_proj, x));
}

LlamaBlock::LlamaBlock(const LlamaOptions& o, std::shared_ptr<RotaryEmbedding> rope) {
  input_layernorm = register_module("input_layernorm", RmsNorm(o.hidden, o.rms_norm_eps));
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(o, std::move(rope)));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(o.hidden, o.rms_norm_eps));
  mlp = register_module("mlp", std::make_shared<LlamaMlp>(o));
}

at::Tensor LlamaBlock::forward_impl_extras(const at::Tensor& x, const UnitExtras& extras) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), extras);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

at::Tensor LlamaBlock::forward_cached(const at::Tensor& x, KvCache& cache, size_t layer,
                                      const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor h = x + self_attn->forward_cached(input_layernorm->forward(x), cache, layer, cos, sin);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

Llama::Llama(const LlamaOptions& o) : options_(o) {
  rope_ = std::make_shared<RotaryEmbedding>(o.rope);
  auto rope = rope_;
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(o.vocab_size, o.hidden));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.n_layer; ++i) layers->push_back(std::make_shared<LlamaBlock>(o, rope));
  norm = register_module("norm", RmsNorm(o.hidden, o.rms_norm_eps));
  if (!o.tie_embeddings) lm_head = register_module("lm_head", make_linear(o.hidden, o.vocab_size, false));
  // transformers' initialisation: N(0, 0.02) for matrices and the embedding, zero biases,
  // norms at one.
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    if (name.find("norm") != std::string::npos) continue;  // ones already
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      p.zero_();
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

at::Tensor Llama::forward(const at::Tensor& idx) { return forward(idx, {}, {}); }

at::Tensor Llama::forward_batch(const Batch& batch) {
  return forward(batch.x, batch.position_ids, batch.attention_mask);
}

at::Tensor Llama::forward(const at::Tensor& idx, const at::Tensor& position_ids,
                          const at::Tensor& attention_mask) {
  const at::Tensor x = hidden_states(idx, position_ids, attention_mask);
  return lm_head ? linear(lm_head, x)
                 : at::linear(autocast_meta_input(x),
                              autocast_meta_input(embed_tokens->weight));  // (B, T, vocab)
}

at::Tensor Llama::batch_loss_sum(const Batch& batch) {
  if (options_.loss_chunk_tokens <= 0) return Model::batch_loss_sum(batch);
  const at::Tensor h = hidden_states(batch.x, batch.position_ids, batch.attention_mask);
  return chunked_linear_cross_entropy(h.reshape({-1, h.size(-1)}),
                                      lm_head ? lm_head->weight : embed_tokens->weight,
                                      batch.y.reshape({-1}), options_.loss_chunk_tokens);
}

double Llama::flops_per_token(int64_t seq_len) const {
  int64_t n = options_.parameter_count();
  if (!options_.tie_embeddings) n -= options_.vocab_size * options_.hidden;
  return 6.0 * static_cast<double>(n) +
         12.0 * static_cast<double>(options_.n_layer * options_.n_head * options_.head_dim() * seq_len);
}

at::Tensor Llama::hidden_states(const at::Tensor& idx, const at::Tensor& position_ids,
                                const at::Tensor& attention_mask) {
  const int64_t T = idx.size(1);
  if (T > options_.max_position) {
    throw Error("model: sequence length " + std::to_string(T) + " exceeds block_size " +
                std::to_string(options_.max_position));
  }
  // Computed once per batch, read by every block.
  const UnitExtras extras = position_ids.defined() || attention_mask.defined()
                                ? LlamaExtras::make(*rope_, idx, position_ids, attention_mask)
                                : UnitExtras{};
  at::Tensor x = embed_tokens->forward(idx);  // (B, T, hidden)
  for (const auto& block : *layers) x = block->as<LlamaBlock>()->forward(x, extras);
  return norm->forward(x);
}

KvCache Llama::make_cache(int64_t batch, int64_t capacity, const at::TensorOptions& options) const {
  return KvCache(options_.n_layer, batch, options_.n_kv_head, capacity, options_.head_dim(),
                 options);
}

at::Tensor Llama::forward_cached(const at::Tensor& idx, KvCache& cache) {
  const int64_t B = idx.size(0), T = idx.size(1), past = cache.length();
  if (past + T > options_.max_position) {
    throw Error("model: sequence length " + std::to_string(past + T) + " exceeds block_size " +
                std::to_string(options_.max_position));
  }
  const at::Tensor positions =
      at::arange(past, past + T, idx.options().dtype(at::kLong)).expand({B, T});
  const auto [cos, sin] = rope_->cos_sin_at(positions);
  at::Tensor x = embed_tokens->forward(idx);
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layers[i]->as<LlamaBlock>()->forward_cached(x, cache, i, cos, sin);
  }
  cache.advance(T);
  x = norm->forward(x);
  return lm_head ? linear(lm_head, x) : at::linear(x, embed_tokens->weight);
}

}  // namespace frugal
