#include "frugal/data/synthetic.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "frugal/data/dataset.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "random.h"

namespace frugal {

namespace {

// Common part: sample i draws from SplitMix(mix(sample_seed, i)), so get() is a pure function.
class Synthetic : public Dataset {
 public:
  explicit Synthetic(SyntheticOptions options) : o_(std::move(options)) {}
  int64_t size() const override { return o_.samples; }

 protected:
  detail::SplitMix sample_rng(int64_t i) const {
    if (i < 0 || i >= o_.samples) {
      throw std::out_of_range(fmt::format("synthetic: sample {} outside [0, {})", i, o_.samples));
    }
    return detail::SplitMix(detail::mix(o_.sample_seed, static_cast<uint64_t>(i)));
  }
  // Fixed Gaussian parameters of the task (teacher weights, templates), from `seed` alone.
  std::vector<float> task_normals(int64_t count) const {
    detail::SplitMix rng(detail::mix(o_.seed, 0x7A5C));
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = static_cast<float>(rng.normal());
    return values;
  }
  SyntheticOptions o_;
};

// Tokens follow next = rule[prev], except with probability `noise` a uniform token: the best
// achievable loss is about noise * ln(vocab) + H(noise), far below ln(vocab).
class SyntheticTokens : public Synthetic {
 public:
  explicit SyntheticTokens(SyntheticOptions options) : Synthetic(std::move(options)) {
    rule_.resize(static_cast<size_t>(o_.vocab_size));
    std::iota(rule_.begin(), rule_.end(), 0);
    detail::SplitMix rng(detail::mix(o_.seed, 0x70C5));
    for (int64_t i = o_.vocab_size - 1; i > 0; --i) {  // Fisher-Yates
      std::swap(rule_[static_cast<size_t>(i)],
                rule_[detail::below(rng, static_cast<uint64_t>(i + 1))]);
    }
  }

  Batch get(const std::vector<int64_t>& indices) const override {
    const auto batch = static_cast<int64_t>(indices.size());
    const int64_t T = o_.seq_len;
    const auto vocab = static_cast<uint64_t>(o_.vocab_size);
    at::Tensor x = at::empty({batch, T}, at::kLong);  // (B, T)
    at::Tensor y = at::empty({batch, T}, at::kLong);  // (B, T)
    int64_t* xs = x.data_ptr<int64_t>();
    int64_t* ys = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      detail::SplitMix rng = sample_rng(indices[static_cast<size_t>(b)]);
      auto token = static_cast<int64_t>(detail::below(rng, vocab));
      for (int64_t t = 0; t < T; ++t) {
        xs[b * T + t] = token;
        token = rng.uniform() < o_.noise ? static_cast<int64_t>(detail::below(rng, vocab))
                                         : rule_[static_cast<size_t>(token)];
        ys[b * T + t] = token;
      }
    }
    return {x, y};
  }

 private:
  std::vector<int64_t> rule_;  // (vocab): a permutation
};

// Gaussian features labelled by a fixed random linear teacher: y = argmax(W x).
class SyntheticFeatures : public Synthetic {
 public:
  explicit SyntheticFeatures(SyntheticOptions options)
      : Synthetic(std::move(options)), teacher_(task_normals(o_.out_features * o_.in_features)) {}

  Batch get(const std::vector<int64_t>& indices) const override {
    const auto batch = static_cast<int64_t>(indices.size());
    const int64_t F = o_.in_features, C = o_.out_features;
    at::Tensor x = at::empty({batch, F}, at::kFloat);  // (B, F)
    at::Tensor y = at::empty({batch}, at::kLong);      // (B)
    float* xs = x.data_ptr<float>();
    int64_t* ys = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      detail::SplitMix rng = sample_rng(indices[static_cast<size_t>(b)]);
      float* features = xs + b * F;
      for (int64_t f = 0; f < F; ++f) features[f] = static_cast<float>(rng.normal());
      int64_t best = 0;
      double best_score = 0;
      for (int64_t c = 0; c < C; ++c) {
        double score = 0;
        for (int64_t f = 0; f < F; ++f) score += teacher_[c * F + f] * features[f];
        if (c == 0 || score > best_score) best = c, best_score = score;
      }
      ys[b] = best;
    }
    return {x, y};
  }

 private:
  std::vector<float> teacher_;  // (C, F)
};

// Each class has a fixed random image; a sample is its class's image, faded, plus noise.
class SyntheticImages : public Synthetic {
 public:
  explicit SyntheticImages(SyntheticOptions options)
      : Synthetic(std::move(options)),
        pixels_(o_.in_channels * o_.image_size * o_.image_size),
        templates_(task_normals(o_.num_classes * pixels_)) {}

  Batch get(const std::vector<int64_t>& indices) const override {
    const auto batch = static_cast<int64_t>(indices.size());
    const int64_t S = o_.image_size;
    at::Tensor x = at::empty({batch, o_.in_channels, S, S}, at::kFloat);  // (B, C, S, S)
    at::Tensor y = at::empty({batch}, at::kLong);                         // (B)
    float* xs = x.data_ptr<float>();
    int64_t* ys = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      detail::SplitMix rng = sample_rng(indices[static_cast<size_t>(b)]);
      auto label = static_cast<int64_t>(detail::below(rng, static_cast<uint64_t>(o_.num_classes)));
      const float* image = templates_.data() + label * pixels_;
      for (int64_t p = 0; p < pixels_; ++p) {
        xs[b * pixels_ + p] = 0.5f * image[p] + static_cast<float>(rng.normal());
      }
      ys[b] = label;
    }
    return {x, y};
  }

 private:
  int64_t pixels_;                // C * S * S
  std::vector<float> templates_;  // (classes, C, S, S)
};

void require_positive(int64_t value, const char* key) {
  if (value < 1)
    throw Error(fmt::format("{} must be >= 1 for synthetic data (got {})", key, value));
}

}  // namespace

std::shared_ptr<Dataset> make_synthetic(const SyntheticOptions& options) {
  if (options.samples < 0) throw Error("data.synthetic_samples must be >= 0");
  if (options.kind == "tokens") {  // language models: token sequences
    require_positive(options.vocab_size, "model.vocab_size");
    require_positive(options.seq_len, "data.seq_len");
    return std::make_shared<SyntheticTokens>(options);
  }
  if (options.kind == "features") {
    require_positive(options.in_features, "model.in_features");
    require_positive(options.out_features, "model.out_features");
    return std::make_shared<SyntheticFeatures>(options);
  }
  if (options.kind == "images") {
    require_positive(options.in_channels, "model.in_channels");
    require_positive(options.image_size, "model.image_size");
    require_positive(options.num_classes, "model.num_classes");
    return std::make_shared<SyntheticImages>(options);
  }
  throw Error(
      fmt::format("data.type synthetic: no synthetic data of kind '{}' (tokens, "
                  "features or images)",
                  options.kind));
}

SyntheticOptions synthetic_options(const DataConfig& data, const ModelConfig& model, Split split,
                                   uint64_t seed) {
  SyntheticOptions o;
  // What the model reads (its spec) decides the samples' kind.
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  const ModelSpec::Inputs inputs = spec ? spec->inputs : ModelSpec::Inputs::other;
  if (inputs == ModelSpec::Inputs::other) {
    throw Error(
        fmt::format("data.type synthetic: no synthetic data for model.type '{}' (its "
                    "spec names no inputs: tokens, features or images)",
                    model.type));
  }
  o.kind = inputs == ModelSpec::Inputs::tokens     ? "tokens"
           : inputs == ModelSpec::Inputs::features ? "features"
                                                   : "images";
  o.seed = seed;
  const bool train = split == Split::train;
  o.sample_seed = detail::mix(seed, train ? 1 : 2);
  o.samples = train ? data.synthetic_samples : std::max<int64_t>(64, data.synthetic_samples / 10);
  o.vocab_size = model.vocab_size;
  o.seq_len = resolved_seq_len(data, model);
  o.in_features = model.in_features;
  o.out_features = model.out_features;
  o.in_channels = model.in_channels;
  o.image_size = model.image_size;
  o.num_classes = model.num_classes;
  return o;
}

}  // namespace frugal
