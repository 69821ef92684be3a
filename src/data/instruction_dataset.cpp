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

std::vector<std::vector<int64_t>> group_by_positions(const std::vector<int64_t>& lengths,
                                                     int64_t max_positions, int64_t max_rows) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<int64_t>> groups;
  int64_t longest = 0;  // of the open group: its first row, the order being longest first
  for (int64_t row : order) {
    if (lengths[row] > max_positions || lengths[row] < 1) {
      throw std::invalid_argument("group_by_positions: a row of " + std::to_string(lengths[row]) +
                                  " positions for batches of " + std::to_string(max_positions));
    }
    const auto open = groups.empty() ? int64_t{0} : static_cast<int64_t>(groups.back().size());
    if (open == 0 || open == max_rows || (open + 1) * longest > max_positions) {
      groups.emplace_back();
      longest = lengths[row];
    }
    groups.back().push_back(row);
  }
  return groups;
}

namespace {
int64_t positions_of(const LabeledTokens& s) { return static_cast<int64_t>(s.ids.size()) - 1; }
}  // namespace

InstructionDataset::InstructionDataset(std::vector<LabeledTokens> samples, int64_t seq_len,
                                       bool packing, int64_t max_tokens_per_batch, int64_t max_rows)
    : samples_(std::move(samples)),
      seq_len_(seq_len),
      packing_(packing),
      grouped_(max_tokens_per_batch > 0) {
  if (packing_) {
    std::vector<int64_t> lengths;
    lengths.reserve(samples_.size());
    for (const auto& s : samples_) lengths.push_back(positions_of(s));
    rows_ = pack_best_fit_decreasing(lengths, seq_len_);
  } else {
    for (int64_t i = 0; i < static_cast<int64_t>(samples_.size()); ++i) rows_.push_back({i});
  }
  if (!grouped_) {
    for (int64_t r = 0; r < static_cast<int64_t>(rows_.size()); ++r) items_.push_back({r});
    return;
  }
  std::vector<int64_t> lengths;
  lengths.reserve(rows_.size());
  for (int64_t r = 0; r < static_cast<int64_t>(rows_.size()); ++r) {
    lengths.push_back(row_positions(r));
  }
  items_ = group_by_positions(lengths, max_tokens_per_batch,
                              max_rows > 0 ? max_rows : static_cast<int64_t>(rows_.size()));
}

int64_t InstructionDataset::row_positions(int64_t row) const {
  // A row is padded to seq_len when packed; else it is its one sample.
  return packing_ ? seq_len_ : positions_of(samples_[rows_.at(row).front()]);
}

double InstructionDataset::fill() const {
  int64_t real = 0, held = 0;
  for (const auto& item : items_) {
    int64_t longest = 0;
    for (int64_t r : item) {
      for (int64_t i : rows_[r]) real += positions_of(samples_[i]);
      longest = std::max(longest, row_positions(r));
    }
    held += longest * static_cast<int64_t>(item.size());
  }
  return held > 0 ? static_cast<double>(real) / static_cast<double>(held) : 0.0;
}

Batch InstructionDataset::get(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> rows;
  std::vector<Batch::Part> parts;
  for (int64_t item : indices) {
    int64_t longest = 1;
    for (int64_t r : items_.at(item)) {
      rows.push_back(r);
      longest = std::max(longest, row_positions(r));
    }
    parts.push_back({static_cast<int64_t>(items_[item].size()), longest});
  }
  const auto B = static_cast<int64_t>(rows.size());
  int64_t T = 1;
  for (const Batch::Part& p : parts) T = std::max(T, p.positions);
  at::Tensor x = at::zeros({B, T}, at::kLong);
  at::Tensor y = at::full({B, T}, kIgnoreIndex, at::kLong);
  at::Tensor pos = packing_ ? at::zeros({B, T}, at::kLong) : at::Tensor();
  auto* xs = x.data_ptr<int64_t>();
  auto* ys = y.data_ptr<int64_t>();
  int64_t* ps = packing_ ? pos.data_ptr<int64_t>() : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = 0;
    for (int64_t i : rows_[rows[b]]) {
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
  if (grouped_) batch.parts = std::move(parts);
  return batch;
}

}  // namespace frugal
