#include "frugal/data/sampler.h"

#include <numeric>
#include <random>
#include <stdexcept>

#include "random.h"

namespace frugal {

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  // mt19937_64's output sequence is fixed by the standard; below() avoids the
  // implementation-defined std::uniform_int_distribution.
  std::mt19937_64 rng(detail::mix(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[static_cast<size_t>(i)],
              order[detail::below(rng, static_cast<uint64_t>(i + 1))]);
  }
  return order;
}

std::vector<int64_t> rank_batch(const std::vector<int64_t>& order, int64_t batch,
                                int64_t batch_size, int rank, int world_size) {
  const int64_t first = (batch * world_size + rank) * batch_size;
  if (first < 0 || first + batch_size > static_cast<int64_t>(order.size())) {
    throw std::out_of_range("rank_batch: batch outside the epoch");
  }
  return {order.begin() + first, order.begin() + first + batch_size};
}

}  // namespace frugal
