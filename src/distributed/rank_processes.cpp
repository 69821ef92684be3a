#include "rank_processes.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "frugal/util/error.h"

namespace frugal::dist {

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Stream::emit(const std::string& prefix, bool flush_partial) {
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    print(prefix, pending.substr(start, nl - start));
  }
  pending.erase(0, start);
  if (flush_partial && !pending.empty()) {
    print(prefix, pending);
    pending.clear();
  }
}

void Stream::close_now(const std::string& prefix) {
  if (fd < 0) return;
  emit(prefix, true);
  ::close(fd);
  fd = -1;
}

void Stream::print(const std::string& prefix, const std::string& line) {
  write_all(out_fd, prefix + line + "\n");
  if (line.find_first_not_of(" \t\r") != std::string::npos) last_line = line;
}

namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Child spawn(const Job& job, std::vector<std::string> env, int rank, int out_fd, int err_fd) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw Error(fmt::format("launch: cannot create pipes: {}", std::strerror(errno)));
  }
  std::vector<std::string> args = job.args;
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("launch: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execve(job.program.c_str(), argv.data(), envp.data());
    const char msg[] = "frugal launch: cannot execute the rank's program\n";
    (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  Child c;
  c.rank = rank;
  c.pid = pid;
  c.running = true;
  c.out.fd = out[0];
  c.out.out_fd = out_fd;
  c.err.fd = err[0];
  c.err.out_fd = err_fd;
  return c;
}

void pump(std::vector<Child>& children, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Child*, Stream*>> owners;
  for (auto& c : children) {
    for (Stream* s : {&c.out, &c.err}) {
      if (s->fd < 0) continue;
      fds.push_back({s->fd, POLLIN, 0});
      owners.emplace_back(&c, s);
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  char buf[65536];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    auto [child, stream] = owners[i];
    const std::string prefix = fmt::format("[rank {}] ", child->rank);
    const ssize_t n = ::read(stream->fd, buf, sizeof(buf));
    if (n > 0) {
      stream->pending.append(buf, static_cast<size_t>(n));
      stream->emit(prefix, false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      stream->emit(prefix, true);
      ::close(stream->fd);
      stream->fd = -1;
    }
  }
}

void reap(std::vector<Child>& children) {
  for (auto& c : children) {
    if (!c.running) continue;
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.running = false;
      c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  }
}

void signal_all(std::vector<Child>& children, int sig) {
  for (auto& c : children) {
    if (c.running) ::kill(c.pid, sig);
  }
}

bool any_running(const std::vector<Child>& children) {
  return std::any_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
}

}  // namespace frugal::dist
