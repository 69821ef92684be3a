#include "frugal/models/decode.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <typeinfo>

#include "frugal/models/kv_cache.h"
#include "frugal/util/error.h"

namespace frugal {

at::Tensor restrict_logits(at::Tensor logits, int64_t top_k, double top_p) {
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (top_k > 0 && top_k < logits.size(-1)) {
    const at::Tensor kth = std::get<0>(logits.topk(top_k, -1)).select(-1, -1).unsqueeze(-1);
    logits = logits.masked_fill(logits < kth, minus_inf);
  }
  if (top_p < 1.0) {
    auto [sorted, order] = logits.sort(-1, /*descending=*/true);
    const at::Tensor probs = at::softmax(sorted.to(at::kFloat), -1);
    // A token is dropped when the tokens before it already reach top_p: the first one never is.
    const at::Tensor drop = (probs.cumsum(-1) - probs) >= top_p;
    logits = logits.scatter(-1, order, sorted.masked_fill(drop, minus_inf));
  }
  return logits;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The next token from the last position's logits (vocab).
int64_t pick(const at::Tensor& logits, const DecodeOptions& o, at::Generator& generator) {
  if (o.temperature <= 0.0) return logits.argmax().item<int64_t>();
  const at::Tensor scaled = logits.to(at::kCPU, at::kFloat) / o.temperature;
  const at::Tensor probs = at::softmax(restrict_logits(scaled, o.top_k, o.top_p), -1);
  return at::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

at::TensorOptions parameter_options(Model& model) {
  for (const auto& p : model.parameters()) {
    if (p.is_floating_point()) return p.options().requires_grad(false);
  }
  throw Error("generate: the model has no floating-point parameters");
}

}  // namespace

DecodeResult decode(Model& model, const std::vector<int64_t>& prompt, const DecodeOptions& o,
                    const std::function<void(int64_t)>& on_token) {
  auto* decoder = dynamic_cast<CachedDecoder*>(&model);
  if (!decoder) {
    throw Error(
        fmt::format("generate: this model ({}) has no key/value cache; the GPT and the "
                    "Llama family have one",
                    typeid(model).name()));
  }
  if (prompt.empty()) throw Error("generate: the prompt is empty (give at least one token)");
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  if (total > decoder->max_sequence()) {
    throw Error(
        fmt::format("generate: the prompt ({} tokens) and --max-new-tokens ({}) exceed "
                    "the model's context of {} tokens",
                    prompt.size(), o.max_new_tokens, decoder->max_sequence()));
  }
  const at::TensorOptions options = parameter_options(model);
  // Eval mode for the generation, the caller's mode back afterwards (an error included).
  struct ModeGuard {
    Model& model;
    bool was_training;
    ~ModeGuard() { model.train(was_training); }
  } mode{model, model.is_training()};
  model.eval();
  c10::InferenceMode inference;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  KvCache cache = decoder->make_cache(1, total, options);
  DecodeResult result;
  const auto start = Clock::now();
  at::Tensor input = at::tensor(prompt, at::kLong).unsqueeze(0).to(options.device());
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const at::Tensor logits = decoder->forward_cached(input, cache).select(1, -1)[0];
    const int64_t next = pick(logits, o, generator);
    result.tokens.push_back(next);
    if (i == 0) result.prompt_seconds = seconds_since(start);
    if (on_token) on_token(next);
    if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), next) != o.stop_tokens.end()) {
      result.stopped = true;
      break;
    }
    input = at::full({1, 1}, next, options.dtype(at::kLong));
  }
  result.decode_seconds = seconds_since(start) - result.prompt_seconds;
  return result;
}

}  // namespace frugal
