// Labeled samples batched for training: packed best-fit-decreasing into rows with position ids
// per sample, or one sample a row padded to the batch's longest (frugal/data/instruction_data.h).
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include "frugal/data/batch.h"
#include "frugal/data/instruction_data.h"

namespace frugal {

std::vector<std::vector<int64_t>> pack_best_fit_decreasing(const std::vector<int64_t>& lengths,
                                                           int64_t capacity) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<int64_t>> bins;
  // Open bins by room left; the tightest one that still fits takes the item (ties: the bin
  // opened first, so the result does not depend on the map's order of equal keys).
  std::multimap<int64_t, int64_t> by_room;
  for (int64_t item : order) {
    const int64_t n = lengths[item];
    if (n > capacity || n < 1) {
      throw std::invalid_argument("pack_best_fit_decreasing: an item of length " +
                                  std::to_string(n) + " for bins of " + std::to_string(capacity));
    }
    auto it = by_room.lower_bound(n);
    int64_t bin = 0, room = 0;
    if (it == by_room.end()) {
      bin = static_cast<int64_t>(bins.size());
      bins.emplace_back();
      room = capacity;
    } else {
      bin = it->second;
      room = it->first;
      by_room.erase(it);
    }
    bins[bin].push_back(item);
    if (room - n > 0) by_room.emplace(room - n, bin);
  }
  return bins;
}

namespace {
int64_t positions_of(const LabeledTokens& s) { return static_cast<int64_t>(s.ids.size()) - 1; }
}  // namespace

InstructionDataset::InstructionDataset(std::vector<LabeledTokens> samples, int64_t seq_len,
                                       bool packing)
    : samples_(std::move(samples)), seq_len_(seq_len), packing_(packing) {
  if (packing_) {
    std::vector<int64_t> lengths;
    lengths.reserve(samples_.size());
    for (const auto& s : samples_) lengths.push_back(positions_of(s));
    rows_ = pack_best_fit_decreasing(lengths, seq_len_);
  } else {
    for (int64_t i = 0; i < static_cast<int64_t>(samples_.size()); ++i) rows_.push_back({i});
  }
}

double InstructionDataset::fill() const {
  int64_t real = 0, held = 0;
  for (const auto& row : rows_) {
    int64_t n = 0;
    for (int64_t i : row) n += positions_of(samples_[i]);
    real += n;
    held += packing_ ? seq_len_ : n;
  }
  return held > 0 ? static_cast<double>(real) / static_cast<double>(held) : 0.0;
}

Batch InstructionDataset::get(const std::vector<int64_t>& indices) const {
  const auto B = static_cast<int64_t>(indices.size());
  int64_t T = packing_ ? seq_len_ : 1;
  if (!packing_) {
    for (int64_t r : indices) T = std::max(T, positions_of(samples_[rows_.at(r).front()]));
  }
  at::Tensor x = at::zeros({B, T}, at::kLong);
  at::Tensor y = at::full({B, T}, kIgnoreIndex, at::kLong);
  at::Tensor pos = packing_ ? at::zeros({B, T}, at::kLong) : at::Tensor();
  auto* xs = x.data_ptr<int64_t>();
  auto* ys = y.data_ptr<int64_t>();
  int64_t* ps = packing_ ? pos.data_ptr<int64_t>() : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = 0;
    for (int64_t i : rows_.at(indices[b])) {
      const LabeledTokens& s = samples_[i];
      const int64_t n = positions_of(s);
      for (int64_t k = 0; k < n; ++k, ++t) {
        xs[b * T + t] = s.ids[k];
        ys[b * T + t] = s.labels[k + 1];
        if (ps) ps[b * T + t] = k;
      }
    }
    // The padding of a packed row is one more "document" of ignored targets.
    for (int64_t k = 0; ps && t < T; ++k, ++t) ps[b * T + t] = k;
  }
  Batch batch;
  batch.x = x;
  batch.y = y;
  batch.position_ids = pos;
  return batch;
}

}  // namespace frugal
