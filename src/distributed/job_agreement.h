// Private to src/distributed. Before the process group forms, the ranks check through the
// rendezvous store that they were all started for the same job. Launches that disagree (two
// nodes' `frugal launch` with different --nnodes or --nproc-per-node) would otherwise wait out
// the timeout inside Gloo's or NCCL's own rendezvous with no word of why; here the rank that
// sees the difference says it in one line, leaves that line in the store, and every other
// rank of the job ends with it too.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "frugal/distributed/env.h"

namespace frugal::dist::detail {

// Rank 0 publishes the job's size; every rank compares its own, then waits until all
// WORLD_SIZE ranks have joined. A frugal::Error naming both sizes on a rank that disagrees,
// the same line on the others, or one naming how many joined when `timeout` passes first.
void agree_on_job(c10d::Store& store, const RankInfo& info, std::chrono::milliseconds timeout);

}  // namespace frugal::dist::detail
