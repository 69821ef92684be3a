#include "frugal/data/token_stream.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include "frugal/util/error.h"
#include "io/mapped_file.h"

namespace frugal {

// Shards store little-endian tokens and are read in place.
static_assert(std::endian::native == std::endian::little, "frugal assumes a little-endian host");

TokenFormat parse_token_format(const std::string& name) {
  if (name == "auto") return TokenFormat::detect;
  if (name == "nanogpt") return TokenFormat::nanogpt;
  if (name == "llmc") return TokenFormat::llmc;
  throw Error(
      fmt::format("data.token_format: unknown '{}' (expected auto | nanogpt | llmc)", name));
}

std::string_view to_string(TokenFormat format) {
  switch (format) {
    case TokenFormat::detect:
      return "auto";
    case TokenFormat::nanogpt:
      return "nanogpt";
    case TokenFormat::llmc:
      return "llmc";
  }
  return "?";
}

TokenStream::TokenStream(std::vector<Shard> shards) : shards_(std::move(shards)) {
  starts_.reserve(shards_.size());
  for (const Shard& shard : shards_) {
    if (shard.width != 1 && shard.width != 2 && shard.width != 4) {
      throw std::invalid_argument("TokenStream: shard width must be 1, 2 or 4");
    }
    starts_.push_back(total_);
    total_ += shard.count;
  }
}

namespace {

template <class T>
void widen(const uint8_t* bytes, int64_t count, int64_t* out) {
  // memcpy per token: the mapped bytes carry no alignment guarantee for T.
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(value);
  }
}

// The largest token among `count` tokens; a plain loop the compiler vectorizes, split over
// torch's intra-op threads because it touches every byte of possibly many GiB.
template <class T>
int64_t max_token(const uint8_t* bytes, int64_t count) {
  if (count == 0) return -1;
  constexpr int64_t kGrain = int64_t{1} << 20;
  return at::parallel_reduce(
      0, count, kGrain, int64_t{-1},
      [&](int64_t begin, int64_t end, int64_t identity) {
        T m = 0;
        const uint8_t* p = bytes + begin * static_cast<int64_t>(sizeof(T));
        for (int64_t i = 0; i < end - begin; ++i) {
          T v;
          std::memcpy(&v, p + i * sizeof(T), sizeof(T));
          m = v > m ? v : m;
        }
        return std::max(identity, static_cast<int64_t>(m));
      },
      [](int64_t a, int64_t b) { return std::max(a, b); });
}

}  // namespace

void TokenStream::read(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > total_) {
    throw std::out_of_range(
        fmt::format("TokenStream::read: [{}, {}) outside [0, {})", start, start + count, total_));
  }
  // The shard holding `start`: the last one starting at or before it.
  auto s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) -
                               starts_.begin() - 1);
  while (count > 0) {
    const Shard& shard = shards_[s];
    int64_t offset = start - starts_[s];
    int64_t n = std::min(count, shard.count - offset);
    if (n > 0) {
      const uint8_t* bytes = shard.tokens + offset * shard.width;
      if (shard.width == 1) {
        widen<uint8_t>(bytes, n, out);
      } else if (shard.width == 2) {
        widen<uint16_t>(bytes, n, out);
      } else {
        widen<uint32_t>(bytes, n, out);
      }
      out += n;
      start += n;
      count -= n;
    }
    ++s;
  }
}

void TokenStream::check_vocab(int64_t vocab_size, int64_t begin, int64_t end,
                              const std::string& key) const {
  for (size_t s = 0; s < shards_.size(); ++s) {
    const Shard& shard = shards_[s];
    int64_t lo = std::max<int64_t>(begin - starts_[s], 0);
    int64_t hi = std::min<int64_t>(end - starts_[s], shard.count);
    if (lo >= hi) continue;
    const uint8_t* bytes = shard.tokens + lo * shard.width;
    const int64_t m = shard.width == 1   ? max_token<uint8_t>(bytes, hi - lo)
                      : shard.width == 2 ? max_token<uint16_t>(bytes, hi - lo)
                                         : max_token<uint32_t>(bytes, hi - lo);
    if (m < vocab_size) continue;
    // Rare path: find the first offender so the message points at it.
    std::vector<int64_t> tokens(static_cast<size_t>(hi - lo));
    read(starts_[s] + lo, hi - lo, tokens.data());
    auto bad =
        std::find_if(tokens.begin(), tokens.end(), [&](int64_t t) { return t >= vocab_size; });
    throw Error(fmt::format("{}: '{}': token {} at index {} is >= model.vocab_size {}", key,
                            shard.path, *bad, lo + (bad - tokens.begin()), vocab_size));
  }
}

}  // namespace frugal
