// `frugal doctor --distributed`, run under a launcher: the bandwidth the job's ranks get from
// each other in the collectives sharding uses, and what that makes of a config's step under
// each sharding mode, before a job is started on those links (a 4-node job whose gathers cross
// a slow network runs no faster than 1 node; this shows it first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/distributed/communicator.h"

namespace frugal::dist {

struct CollectiveBandwidth {
  std::string op;       // all_reduce | all_gather
  int64_t bytes = 0;    // the buffer (all_gather: the gathered output)
  double seconds = 0;   // one call, the slowest rank's mean over the rounds
  // Bus bandwidth, as NCCL's tests report it: what each rank sends under the ring algorithm
  // (all_reduce 2(N-1)/N x bytes, all_gather (N-1)/N x bytes) per second. Comparable between
  // collectives and world sizes, and with the link's own speed.
  double bus_bytes_per_s = 0;
  // The warm-up call's result was right (all_reduce of each rank's rank + 1 sums to
  // N(N+1)/2; all_gather puts rank r's piece at r): the group is what it should be.
  bool correct = false;
};

// Times all_reduce and all_gather of fp32 buffers of each size over `comm` (one call each to
// warm up, then `rounds`). Collective: every rank calls it with the same arguments.
std::vector<CollectiveBandwidth> measure_collectives(Communicator& comm,
                                                     const std::vector<int64_t>& sizes,
                                                     int rounds);

// This rank's dense matmul throughput (fp32 on the CPU, bf16 on a GPU), FLOP/s, from square
// products for about `seconds`.
double measure_matmul_flops(const c10::Device& device, double seconds);

struct CommShare {
  std::string mode;          // ddp | zero1 | zero2 | zero3
  int64_t sent_bytes = 0;    // per rank per optimizer step, ring algorithm
  double comm_s = 0;         // sent_bytes at the bus bandwidth
  double compute_s = 0;      // forward and backward of the step's tokens on this rank
  double share = 0;          // comm_s / (comm_s + compute_s): none of it overlapped
};

// What each data-parallel mode sends per rank per optimizer step for `params` trained
// parameters of `element_bytes` at world `world` (ddp's all_reduce of the gradients 2(N-1)/N
// x the model; zero1 and zero2 a reduce-scatter and an all-gather, the same; zero3 one
// all-gather more, for backward: 3(N-1)/N), at the bus bandwidth measured for all_reduce
// (ddp) or all_gather (zero*, reduce-scatter taken as fast), against `compute_s` of
// computing. The share is an upper bound: the engine overlaps part of it with backward.
std::vector<CommShare> predict_comm_share(int64_t params, int64_t element_bytes, int world,
                                          double reduce_bus_bytes_per_s,
                                          double gather_bus_bytes_per_s, double compute_s);

}  // namespace frugal::dist
