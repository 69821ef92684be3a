// Deterministic synthetic data for each built-in model family, learnable so that a working
// training loop visibly lowers the loss. Sample i is a pure function of (seed, split, i):
// random access, thread-safe, identical across runs and platforms.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/data/dataset.h"

namespace frugal {

struct SyntheticOptions {
  std::string kind = "tokens";  // tokens | features | images (the model's inputs)
  int64_t samples = 4096;
  uint64_t seed = 0;         // the task (bigram rule, teacher, templates): shared by splits
  uint64_t sample_seed = 0;  // the samples drawn from it: differs between train and val
  // tokens: tokens follow a fixed random permutation of the vocabulary, except that with
  // probability `noise` a token is drawn uniformly instead (loss floor well below ln(vocab)).
  int64_t vocab_size = 256;
  int64_t seq_len = 128;
  double noise = 0.1;
  // features: x ~ N(0, 1)^in_features, y = argmax(W x) for a fixed Gaussian teacher W.
  int64_t in_features = 32;
  int64_t out_features = 10;
  // images: y uniform, x = 0.5 * template[y] + N(0, 1) noise, templates fixed Gaussian images.
  int64_t in_channels = 1;
  int64_t image_size = 28;
  int64_t num_classes = 10;
};

// tokens: x, y (B, T) int64; features: x (B, F) float32, y (B) int64; images: x (B, C, S, S)
// float32, y (B) int64.
std::shared_ptr<Dataset> make_synthetic(const SyntheticOptions& options);

// The options make_dataset uses: the kind from the inputs of model.type's spec (a type that
// names none throws frugal::Error),
// train has data.synthetic_samples samples, val max(64, samples / 10) from another sample seed.
SyntheticOptions synthetic_options(const DataConfig& data, const ModelConfig& model, Split split,
                                   uint64_t seed);

}  // namespace frugal
