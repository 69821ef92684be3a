// The sample order the DataLoader follows, as pure functions, so the contract can be tested
// and reproduced without a loader:
//   epoch e visits order(e) = a permutation of [0, n) (identity when not shuffling), drawn by
//   Fisher-Yates from std::mt19937_64 seeded with mix(seed, e) (SplitMix64 mixing) and an
//   unbiased rejection sampler, so it is the same on every platform and run;
//   global batch b of epoch e covers order(e)[b*B*W, (b+1)*B*W), and rank r takes the
//   contiguous slice [b*B*W + r*B, b*B*W + (r+1)*B).
// So W ranks with batch B see disjoint samples whose union is the 1-rank run with batch B*W.
#pragma once

#include <cstdint>
#include <vector>

namespace frugal {

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

// Rank `rank`'s indices of global batch `batch` (B = batch_size) within one epoch's order.
std::vector<int64_t> rank_batch(const std::vector<int64_t>& order, int64_t batch,
                                int64_t batch_size, int rank, int world_size);

}  // namespace frugal
