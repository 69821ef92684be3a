// The launcher's child processes (distributed/launcher.h): started with their own environment,
// their output read line by line and printed with a "[rank N] " prefix, reaped and signalled.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace frugal::dist {

// Writes all of `text` to fd (retrying short writes and interruptions).
void write_all(int fd, const std::string& text);

// One output stream of one rank: whole lines are printed with the rank's prefix.
struct Stream {
  int fd = -1;     // read end of the pipe, -1 once closed
  int out_fd = 1;  // where its lines go
  std::string pending;
  // The last line with something in it: a failed rank's error, repeated in the launcher's
  // account of the job's end, where a long interleaved log would otherwise bury it.
  std::string last_line;

  void emit(const std::string& prefix, bool flush_partial);
  // Prints what is pending and stops reading.
  void close_now(const std::string& prefix);

 private:
  void print(const std::string& prefix, const std::string& line);
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;  // 128 + signal when killed
  Stream out, err;
};

struct Job {
  std::string program;
  std::vector<std::string> args;  // argv, argv[0] included
};

// Starts `job` with environment `env` (KEY=VALUE), its output into pipes whose lines go to
// out_fd / err_fd. The child dies with this process (PR_SET_PDEATHSIG).
Child spawn(const Job& job, std::vector<std::string> env, int rank, int out_fd, int err_fd);
// Reads what is available from every open stream (waiting up to timeout_ms); prints lines.
void pump(std::vector<Child>& children, int timeout_ms);
// Notes the children that have exited, and their codes.
void reap(std::vector<Child>& children);
void signal_all(std::vector<Child>& children, int sig);
bool any_running(const std::vector<Child>& children);

}  // namespace frugal::dist
