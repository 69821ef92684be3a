// Private to the library. Test hooks, for tests/multiproc/test_rank_faults.cpp and
// test_flight_recorder.cpp only: they make one rank of a job fail the three ways a rank of a
// real job does, at a point the test chooses, so that the other ranks' and the launchers'
// handling of it can be checked. All are off unless set in the environment; each value is
// RANK:N, and a value of another form is an error rather than a hook quietly off:
//   FRUGAL_FAULT_SKIP_COLLECTIVE=RANK:SEQ  rank RANK does not issue its collective number SEQ
//                                          (counted from 0), as a rank whose code took another
//                                          path would not (dist::Communicator)
//   FRUGAL_FAULT_ABORT=RANK:STEP           in step STEP (counted from 1), between the first
//                                          micro-batch's forward and backward, rank RANK dies
//                                          by SIGKILL: no handler, no dump, no clean-up, as a
//                                          crash or the out-of-memory killer
//   FRUGAL_FAULT_HANG=RANK:STEP            at the same point rank RANK stops forever outside
//                                          any collective, as a rank stuck in compute would
//                                          (only a signal ends it)
#pragma once

#include <cstdint>

namespace frugal::dist::detail {

// FRUGAL_FAULT_SKIP_COLLECTIVE's SEQ when it names `rank`, else -1.
int64_t collective_to_skip(int rank);

// Called by the engine between a step's first forward and its backward: dies or hangs there
// when FRUGAL_FAULT_ABORT or FRUGAL_FAULT_HANG names this rank and step, else returns.
void step_fault_point(int rank, int64_t step);

}  // namespace frugal::dist::detail
