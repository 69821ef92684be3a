#include "frugal/data/token_dataset.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <stdexcept>

namespace frugal {

TokenDataset::TokenDataset(TokenStream stream, int64_t seq_len, int64_t eot_token)
    : stream_(std::move(stream)), seq_len_(seq_len), eot_token_(eot_token) {
  if (seq_len_ < 1) throw std::invalid_argument("TokenDataset: seq_len must be >= 1");
  size_ = stream_.size() > 0 ? (stream_.size() - 1) / seq_len_ : 0;
}

Batch TokenDataset::get(const std::vector<int64_t>& indices) const {
  const auto batch = static_cast<int64_t>(indices.size());
  const int64_t T = seq_len_;
  at::Tensor x = at::empty({batch, T}, at::kLong);          // (B, T)
  at::Tensor y = at::empty({batch, T}, at::kLong);          // (B, T)
  std::vector<int64_t> window(static_cast<size_t>(T + 1));  // (T + 1)
  int64_t* xs = x.data_ptr<int64_t>();
  int64_t* ys = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    int64_t i = indices[static_cast<size_t>(b)];
    if (i < 0 || i >= size_) {
      throw std::out_of_range(fmt::format("TokenDataset: sample {} outside [0, {})", i, size_));
    }
    stream_.read(i * T, T + 1, window.data());
    std::copy(window.begin(), window.end() - 1, xs + b * T);
    std::copy(window.begin() + 1, window.end(), ys + b * T);
  }
  if (eot_token_ < 0) return {x, y};
  at::Tensor positions = at::empty({batch, T}, at::kLong);
  int64_t* ps = positions.data_ptr<int64_t>();
  for (int64_t r = 0; r < batch * T; r += T) {
    ps[r] = 0;
    for (int64_t t = 1; t < T; ++t) ps[r + t] = xs[r + t - 1] == eot_token_ ? 0 : ps[r + t - 1] + 1;
  }
  return {x, y, {}, positions};
}

}  // namespace frugal
