// While a job's step loop runs, the two ways a rank dies without an exception of its own
// still leave its flight recorder dump (flight_recorder.h): a SIGTERM (frugal launch, torchrun
// or Slurm stopping the ranks after another one failed) writes the dump, prints the verdict
// over every rank's dumps to stderr and exits 128 + SIGTERM; a std::terminate (Gloo's transport
// thread failing on a mismatched collective, which no caller can catch) writes the dump and
// then terminates as it would have.
#pragma once

#include <thread>

namespace frugal::dist {

class Communicator;

class FatalDumpScope {
 public:
  explicit FatalDumpScope(Communicator& comm);
  ~FatalDumpScope();
  FatalDumpScope(const FatalDumpScope&) = delete;
  FatalDumpScope& operator=(const FatalDumpScope&) = delete;

 private:
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
};

}  // namespace frugal::dist
