// `frugal doctor --distributed`, run under a launcher: the bandwidth the job's ranks get from
// each other in the collectives sharding uses, and what that makes of a config's step under
// each sharding mode, before a job is started on those links (a 4-node job whose gathers cross
// a slow network runs no faster than 1 node; this shows it first).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frugal/distributed/communicator.h"
#include "frugal/strategy/sharding_traits.h"

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
  std::string mode;          // a data-parallel mode: ddp | zero1 | zero2 | zero3 | hsdp | ...
  int64_t sent_bytes = 0;    // per rank per optimizer step, ring algorithm
  double comm_s = 0;         // sent_bytes at the bus bandwidths
  double compute_s = 0;      // forward and backward of the step's tokens on this rank
  double share = 0;          // comm_s / (comm_s + compute_s): none of it overlapped
};

// Bus bandwidths (bytes/s) of one set of links; 0 where not measured.
struct LinkBandwidth {
  double reduce = 0;  // all_reduce
  double gather = 0;  // all_gather (reduce-scatter taken as fast)
};

// What each mode sends per rank per optimizer step for `params` trained parameters of
// `element_bytes` at world `world` (step_traffic, strategy/sharding_traits.h), and how long
// that takes against `compute_s` of computing: over the whole job's links (`job`: all_reduce
// for modes that keep whole state, all_gather for sharded ones); modes with replicated groups
// (hsdp, groups of `group` ranks, one node's) gather over `within` and all-reduce over
// `across` (the job's figures where those are 0). The share is an upper bound: the engine
// overlaps part of it with backward.
std::vector<CommShare> predict_comm_share(const std::vector<std::pair<std::string, ShardingTraits>>& modes,
                                          int64_t params, int64_t element_bytes, int world,
                                          int group, const LinkBandwidth& job,
                                          const LinkBandwidth& within, const LinkBandwidth& across,
                                          double compute_s);

}  // namespace frugal::dist
