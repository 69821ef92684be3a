#include "frugal/distributed/fatal_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "frugal/distributed/communicator.h"
#include "frugal/util/log.h"

namespace frugal::dist {
namespace {

// One scope at a time (a process runs one job); the signal handler may only write a byte.
std::atomic<int> g_wake_fd{-1};
std::atomic<Communicator*> g_comm{nullptr};
std::terminate_handler g_previous_terminate = nullptr;
struct sigaction g_previous_term {};

void on_sigterm(int) {
  const int fd = g_wake_fd.load();
  const char byte = 'T';
  if (fd >= 0) (void)!::write(fd, &byte, 1);
}

[[noreturn]] void on_terminate() {
  if (Communicator* comm = g_comm.exchange(nullptr)) {
    try {
      const std::string verdict = comm->dump_flight_recorder("std::terminate", 0.0);
      if (!verdict.empty()) {
        std::fprintf(stderr, "%sterminating: %s\n", log::rank_prefix().c_str(), verdict.c_str());
      }
    } catch (...) {
    }
  }
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

}  // namespace

FatalDumpScope::FatalDumpScope(Communicator& comm) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) return;  // no dumps on signals, nothing else lost
  g_comm.store(&comm);
  g_wake_fd.store(pipe_[1]);
  g_previous_terminate = std::set_terminate(on_terminate);
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &g_previous_term);
  watcher_ = std::thread([fd = pipe_[0]] {
    char byte = 0;
    while (::read(fd, &byte, 1) < 0) {
    }
    if (byte != 'T') return;  // the scope is closing
    if (Communicator* comm = g_comm.exchange(nullptr)) {
      // The other ranks get the same signal at the same moment: a second for their dumps.
      const std::string verdict = comm->dump_flight_recorder("SIGTERM", 1.0);
      if (!verdict.empty()) {
        std::fprintf(stderr, "%sstopped by SIGTERM: %s\n", log::rank_prefix().c_str(),
                     verdict.c_str());
      }
      std::fflush(stderr);
    }
    std::_Exit(128 + SIGTERM);
  });
}

FatalDumpScope::~FatalDumpScope() {
  if (pipe_[1] < 0) return;
  if (std::uncaught_exceptions() > 0) {
    // This rank is failing with its own error (a failed collective's, which names the peer):
    // the launcher's SIGTERM, sent as soon as another rank died, must not cut that line off
    // on its way to the CLI; the process exits right after it (a launcher's SIGKILL remains).
    ::signal(SIGTERM, SIG_IGN);
  } else {
    ::sigaction(SIGTERM, &g_previous_term, nullptr);
  }
  std::set_terminate(g_previous_terminate);
  g_comm.store(nullptr);
  g_wake_fd.store(-1);
  const char byte = 'Q';
  (void)!::write(pipe_[1], &byte, 1);
  if (watcher_.joinable()) watcher_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

}  // namespace frugal::dist
