// Small, fully specified random number helpers (private to src/data). Everything here is
// defined bit for bit (no std::*_distribution, whose output differs between standard
// libraries), so data order and synthetic data are the same on every platform and run.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace frugal::detail {

// SplitMix64's output function: a strong 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Combines two values into one well-mixed seed; mix(a, b) != mix(b, a).
inline uint64_t mix(uint64_t a, uint64_t b) {
  return mix64(mix64(a) + 0x9E3779B97F4A7C15ull * (b + 1));
}

// Uniform in [0, n) from a 64-bit generator, without modulo bias (rejection sampling).
template <class Rng>
uint64_t below(Rng& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: reject the incomplete last block
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

// SplitMix64: a counter-based generator, so sample i of a synthetic data set is computed from
// (seed, i) alone, in any order and on any thread.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t operator()() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }
  double uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller; 1 - u keeps the log's argument in (0, 1]
    double u = 1.0 - uniform();
    double v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }

 private:
  uint64_t state_;
};

}  // namespace frugal::detail
