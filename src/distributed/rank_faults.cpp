#include "distributed/rank_faults.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::dist::detail {
namespace {

struct RankFault {
  int rank = -1;
  int64_t at = -1;  // a collective's sequence number or a step, as the hook says
};

std::optional<RankFault> rank_fault_from_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  RankFault f;
  long long at = -1;
  int consumed = 0;
  if (std::sscanf(v, "%d:%lld%n", &f.rank, &at, &consumed) != 2 || v[consumed] != '\0' ||
      f.rank < 0 || at < 0) {
    throw Error(fmt::format("{}='{}': expected RANK:N (a test hook)", name, v));
  }
  f.at = at;
  return f;
}

struct StepFaults {
  std::optional<RankFault> abort = rank_fault_from_env("FRUGAL_FAULT_ABORT");
  std::optional<RankFault> hang = rank_fault_from_env("FRUGAL_FAULT_HANG");
};

const StepFaults& step_faults() {
  static const StepFaults f;
  return f;
}

bool names(const std::optional<RankFault>& f, int rank, int64_t at) {
  return f && f->rank == rank && f->at == at;
}

}  // namespace

int64_t collective_to_skip(int rank) {
  const auto f = rank_fault_from_env("FRUGAL_FAULT_SKIP_COLLECTIVE");
  return f && f->rank == rank ? f->at : -1;
}

void step_fault_point(int rank, int64_t step) {
  const StepFaults& f = step_faults();
  if (names(f.abort, rank, step)) {
    log::warn(fmt::format("FRUGAL_FAULT_ABORT: rank {} dies by SIGKILL in step {}", rank, step));
    std::fflush(nullptr);
    ::raise(SIGKILL);
  }
  if (names(f.hang, rank, step)) {
    log::warn(fmt::format("FRUGAL_FAULT_HANG: rank {} hangs in step {}, outside any collective",
                          rank, step));
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

}  // namespace frugal::dist::detail
