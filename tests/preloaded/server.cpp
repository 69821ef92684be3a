// The tests' frugal, preloaded: the server half, a library LD_PRELOADed into build/bin/frugal by
// the client's --preloaded-start (client.cpp). It takes main's place in that process only: with
// FRUGAL_PRELOADED_SERVE=NAME set, main becomes a fork server on the abstract socket NAME. Each
// request forks this process, which has loaded libtorch and run every static initializer
// (torch's operator registrations: ~0.25 s of CPU, paid ~600 times by a test run otherwise),
// and the fork calls frugal's own main with the caller's arguments, environment, working folder,
// limits and standard streams; its exit status goes back to the caller. Without that variable
// the library passes main through untouched.
#include <dirent.h>
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "protocol.h"

extern char** environ;

namespace frugal::preloaded {
namespace {

using Main = int (*)(int, char**, char**);
Main frugal_main = nullptr;
constexpr int kIdleSeconds = 900;  // the server ends by itself when nobody called it this long

// Where the kernel reads /proc/PID/cmdline from: the server's own argument strings (its last
// argument is padding the client adds to make room). A fork writes its command there, so that
// what looks for a job's processes by their command line (tests/support's
// processes_mentioning, pkill -f) finds it as it would find a process of its own.
char* title_begin = nullptr;
char* title_end = nullptr;

void set_title(const std::vector<std::string>& argv) {
  if (title_begin == nullptr) return;
  char* at = title_begin;
  for (const std::string& arg : argv) {
    const size_t room = static_cast<size_t>(title_end - at);
    if (room <= 1) break;
    const size_t n = std::min(arg.size(), room - 1);
    std::memcpy(at, arg.data(), n);
    at += n;
    *at++ = '\0';
  }
  std::memset(at, 0, static_cast<size_t>(title_end - at));
}

std::vector<std::string> load_time_environment(char** env) {
  std::vector<std::string> out;
  for (char** e = env; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!read_at_load(entry) || entry.rfind("LD_PRELOAD=", 0) == 0) continue;
    out.push_back(entry);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> server_load_time_environment;
std::string server_attributes;

int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

struct Request {
  std::string attributes;  // process_attributes() of the caller
  std::string cwd;
  mode_t mask = 022;
  std::vector<rlimit> limits;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

bool parse(const std::vector<std::string>& f, Request& r) {
  constexpr size_t n_limits = sizeof(kLimits) / sizeof(kLimits[0]);
  size_t i = 0;
  auto next = [&](std::string& out) {
    if (i >= f.size()) return false;
    out = f[i++];
    return true;
  };
  std::string field;
  if (!next(field) || field != kMagic || !next(r.attributes) || !next(r.cwd) || !next(field)) {
    return false;
  }
  try {
    r.mask = static_cast<mode_t>(std::stoul(field, nullptr, 8));
    for (size_t k = 0; k < n_limits; ++k) {
      rlimit l{};
      if (!next(field)) return false;
      l.rlim_cur = std::stoull(field);
      if (!next(field)) return false;
      l.rlim_max = std::stoull(field);
      r.limits.push_back(l);
    }
    if (!next(field)) return false;
    const size_t argc = std::stoul(field);
    for (size_t k = 0; k < argc; ++k) {
      r.argv.emplace_back();
      if (!next(r.argv.back())) return false;
    }
    if (!next(field)) return false;
    const size_t envc = std::stoul(field);
    for (size_t k = 0; k < envc; ++k) {
      r.env.emplace_back();
      if (!next(r.env.back())) return false;
    }
  } catch (const std::exception&) {
    return false;
  }
  return !r.argv.empty();
}

void reply(int conn, const std::string& text) {
  (void)::send(conn, text.data(), text.size(), MSG_NOSIGNAL);
}

// In the fork: become the caller's command, then frugal's main. Never returns.
[[noreturn]] void become(const Request& r, const int fds[3], const sigset_t& old_mask) {
  for (int target = 0; target < 3; ++target) ::dup2(fds[target], target);
  for (int k = 0; k < 3; ++k) {
    if (fds[k] > 2) ::close(fds[k]);
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (::chdir(r.cwd.c_str()) != 0) {
    std::fprintf(stderr, "preloaded frugal: cannot enter %s: %s\n", r.cwd.c_str(),
                 std::strerror(errno));
    std::_Exit(127);
  }
  ::umask(r.mask);
  for (size_t k = 0; k < r.limits.size(); ++k) {
    ::setrlimit(kLimits[k], &r.limits[k]);  // a limit above the server's hard one stays there
  }
  ::clearenv();
  for (const std::string& entry : r.env) ::putenv(::strdup(entry.c_str()));
  set_title(r.argv);
  std::vector<char*> argv;
  for (const std::string& a : r.argv) argv.push_back(::strdup(a.c_str()));
  argv.push_back(nullptr);
  std::exit(frugal_main(static_cast<int>(argv.size() - 1), argv.data(), environ));
}

// Receives one request with its descriptors; false for a malformed one (descriptors closed).
bool receive(int conn, Request& r, int fds[3], bool& stop) {
  std::string buffer(kMaxMessage, '\0');
  iovec io{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  int received = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      received = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      std::memcpy(fds, CMSG_DATA(c), std::min(received, 3) * sizeof(int));
    }
  }
  buffer.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const std::vector<std::string> fields = unpack(buffer);
  stop = fields.size() == 1 && fields[0] == kStop;
  if (received == 3 && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && parse(fields, r)) return true;
  for (int k = 0; k < std::min(received, 3); ++k) ::close(fds[k]);
  return false;
}

// The request's load-time variables must be the server's (they took effect as it started), and
// so must the attributes of its process.
bool fork_can_run(const Request& r) {
  std::vector<std::string> env;
  for (const std::string& e : r.env) {
    if (read_at_load(e)) env.push_back(e);
  }
  std::sort(env.begin(), env.end());
  return env == server_load_time_environment && r.attributes == server_attributes &&
         thread_count() == 1;
}

int serve(const char* name) {
  socklen_t length = 0;
  const sockaddr_un addr = address(name, length);
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  bool bound = false;
  for (int attempt = 0; attempt < 50 && !bound; ++attempt) {  // a stopped server may hold it
    bound = ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), length) == 0;
    if (!bound) ::usleep(100 * 1000);
  }
  if (!bound || ::listen(listener, 64) != 0) {
    std::printf("preloaded frugal: cannot listen on %s: %s\n", name, std::strerror(errno));
    return 1;
  }
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, &old_mask);
  const int children = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  std::printf("preloaded frugal: serving %s\n", name);
  std::fflush(stdout);
  std::map<pid_t, int> running;  // each fork and its caller's connection
  bool listening = true;
  const uid_t uid = ::getuid();
  while (listening || !running.empty()) {
    std::vector<pollfd> polled{{children, POLLIN, 0}};
    if (listening) polled.push_back({listener, POLLIN, 0});
    for (const auto& [pid, conn] : running) {
      if (conn >= 0) polled.push_back({conn, POLLIN, 0});
    }
    const int ready = ::poll(polled.data(), polled.size(), running.empty() ? kIdleSeconds * 1000 : -1);
    if (ready == 0) break;  // idle
    if (ready < 0) continue;
    if (polled[0].revents != 0) {
      signalfd_siginfo info;
      while (::read(children, &info, sizeof(info)) == sizeof(info)) {
      }
      int status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        auto it = running.find(pid);
        if (it == running.end()) continue;
        if (it->second >= 0) {
          reply(it->second, "exit " + std::to_string(status));
          ::close(it->second);
        }
        running.erase(it);
      }
    }
    // A caller gone (killed, or its timeout struck) takes its command with it, as a signal
    // that killed the command's own process would have.
    for (size_t k = listening ? 2 : 1; k < polled.size(); ++k) {
      if (polled[k].revents == 0) continue;
      for (auto& [pid, conn] : running) {
        if (conn != polled[k].fd) continue;
        ::kill(pid, SIGKILL);
        ::close(conn);
        conn = -1;  // reaped without a reply
      }
    }
    if (!listening || polled[1].revents == 0) continue;
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    ucred peer{};
    socklen_t peer_length = sizeof(peer);
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 || peer.uid != uid) {
      ::close(conn);
      continue;
    }
    Request request;
    int fds[3] = {-1, -1, -1};
    bool stop = false;
    if (!receive(conn, request, fds, stop)) {
      if (stop) {  // no new command; the running ones still get their exit status
        ::close(listener);
        listening = false;
      }
      ::close(conn);
      continue;
    }
    if (!fork_can_run(request)) {
      reply(conn, "plain");
      ::close(conn);
      for (int fd : fds) ::close(fd);
      continue;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(listener);
      ::close(children);
      ::close(conn);
      for (const auto& [other, other_conn] : running) {
        if (other_conn >= 0) ::close(other_conn);
      }
      become(request, fds, old_mask);
    }
    for (int fd : fds) ::close(fd);
    if (pid < 0) {
      reply(conn, "plain");
      ::close(conn);
      continue;
    }
    reply(conn, "pid " + std::to_string(pid));
    running[pid] = conn;
  }
  return 0;
}

int serve_or_run(int argc, char** argv, char** env) {
  const char* name = std::getenv("FRUGAL_PRELOADED_SERVE");
  if (name == nullptr) return frugal_main(argc, argv, env);
  title_begin = argv[0];
  title_end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
  const std::string own_name = name;
  ::unsetenv("FRUGAL_PRELOADED_SERVE");
  server_load_time_environment = load_time_environment(env);
  server_attributes = process_attributes();
  return serve(own_name.c_str());
}

}  // namespace
}  // namespace frugal::preloaded

// glibc calls this to run main after the constructors of every library loaded; taking it over
// from a preloaded library is the one way to wrap main without changing the program.
extern "C" int __libc_start_main(frugal::preloaded::Main main, int argc, char** argv,
                                 void (*init)(), void (*fini)(), void (*rtld_fini)(),
                                 void* stack_end) {
  using Real = int (*)(frugal::preloaded::Main, int, char**, void (*)(), void (*)(), void (*)(),
                       void*);
  const auto real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "__libc_start_main"));
  frugal::preloaded::frugal_main = main;
  return real(frugal::preloaded::serve_or_run, argc, argv, init, fini, rtld_fini, stack_end);
}
