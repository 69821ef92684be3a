// The tests' frugal, preloaded: the client half (build/tests/preloaded/frugal). Tests run it
// wherever they would run build/bin/frugal (tests/support's frugal_binary(), when CTest sets
// FRUGAL_TEST_FRUGAL): it hands the command to the fork server (server.cpp) with its standard
// streams, forwards the signals it gets to the command's process and exits as that process did.
// Where no server answers, or the server declines (a variable read as libraries load differs,
// e.g. FRUGAL_CUDA or LD_DEBUG, or the process's own attributes: a seccomp policy, its
// CPUs, namespaces), it becomes build/bin/frugal itself (exec).
//
//   frugal --preloaded-start LOG   start the server (CTest's fixture `frugal`)
//   frugal --preloaded-stop        stop it: it takes no new command and ends after the last
//
// The server's name (FRUGAL_PRELOADED_SERVER names another) and the real binary are compiled in
// (tests/CMakeLists.txt). On a machine
// with an NVIDIA driver the server does not start: a fork of a process that may touch CUDA.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "protocol.h"

extern char** environ;

namespace frugal::preloaded {
namespace {

constexpr const char* kServer = FRUGAL_PRELOADED_NAME;
constexpr const char* kFrugal = FRUGAL_PRELOADED_BINARY;
constexpr const char* kServerLibrary = FRUGAL_PRELOADED_LIBRARY;
constexpr int kForwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
                              SIGUSR2, SIGALRM, SIGWINCH, SIGCONT};

volatile sig_atomic_t command_pid = 0;

// FRUGAL_PRELOADED_SERVER names another server (a test's own: test_preloaded_frugal.cpp).
const char* server_name() {
  const char* name = std::getenv("FRUGAL_PRELOADED_SERVER");
  return name != nullptr && *name != '\0' ? name : kServer;
}

void forward(int signal) {
  if (command_pid > 0) ::kill(command_pid, signal);
}

int connect_server() {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  socklen_t length = 0;
  const sockaddr_un a = address(server_name(), length);
  if (s >= 0 && ::connect(s, reinterpret_cast<const sockaddr*>(&a), length) == 0) return s;
  if (s >= 0) ::close(s);
  return -1;
}

[[noreturn]] void exec_frugal(char** argv) {
  argv[0] = const_cast<char*>(kFrugal);
  ::execv(kFrugal, argv);
  std::fprintf(stderr, "frugal (preloaded): cannot run %s: %s\n", kFrugal, std::strerror(errno));
  std::_Exit(127);
}

std::string request(int argc, char** argv) {
  std::vector<std::string> f{kMagic, process_attributes()};
  char cwd[4096];
  f.push_back(::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  char octal[16];
  std::snprintf(octal, sizeof(octal), "%o", static_cast<unsigned>(mask));
  f.push_back(octal);
  for (int resource : kLimits) {
    rlimit l{};
    ::getrlimit(resource, &l);
    f.push_back(std::to_string(l.rlim_cur));
    f.push_back(std::to_string(l.rlim_max));
  }
  f.push_back(std::to_string(argc));
  f.push_back(kFrugal);
  for (int i = 1; i < argc; ++i) f.push_back(argv[i]);
  size_t envc = 0;
  for (char** e = environ; *e != nullptr; ++e) ++envc;
  f.push_back(std::to_string(envc));
  for (char** e = environ; *e != nullptr; ++e) f.push_back(*e);
  return pack(f);
}

bool send_request(int s, const std::string& message) {
  if (message.size() > kMaxMessage) return false;
  const int fds[3] = {0, 1, 2};
  for (int fd : fds) {
    if (::fcntl(fd, F_GETFD) < 0) return false;  // a closed standard stream: run it plainly
  }
  iovec io{const_cast<char*>(message.data()), message.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  return ::sendmsg(s, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(message.size());
}

// One reply; empty when the server closed the connection (or reset it, stopping with the
// request unread).
std::string receive_reply(int s) {
  char buffer[256];
  for (;;) {
    const ssize_t n = ::recv(s, buffer, sizeof(buffer), 0);
    if (n >= 0) return std::string(buffer, static_cast<size_t>(n));
    if (errno != EINTR) return "";
  }
}

[[noreturn]] void exit_as(int status) {
  if (WIFEXITED(status)) std::_Exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  std::signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  std::_Exit(128 + sig);
}

// Through the server; returns only where the command must run the plain way.
void run_preloaded(int argc, char** argv) {
  const int s = connect_server();
  if (s < 0) return;
  // Signals wait until the command's process is known, then reach it.
  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
  std::string reply;
  if (send_request(s, request(argc, argv))) reply = receive_reply(s);
  if (reply.rfind("pid ", 0) != 0) {  // "plain", or the server is gone: nothing started
    ::close(s);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return;
  }
  command_pid = static_cast<pid_t>(std::atol(reply.c_str() + 4));
  struct sigaction action{};
  action.sa_handler = forward;
  sigemptyset(&action.sa_mask);
  for (int sig : kForwarded) ::sigaction(sig, &action, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  const std::string status = receive_reply(s);
  if (status.rfind("exit ", 0) != 0) {
    std::fprintf(stderr, "frugal (preloaded): the server ended before the command did\n");
    std::_Exit(1);
  }
  exit_as(std::atoi(status.c_str() + 5));
}

void stop_server() {
  const int s = connect_server();
  if (s < 0) return;
  const std::string message = pack({kStop});
  (void)::send(s, message.data(), message.size(), MSG_NOSIGNAL);
  ::close(s);
}

bool nvidia_driver_seen() {
  return ::access("/proc/driver/nvidia/version", F_OK) == 0 || ::access("/dev/nvidiactl", F_OK) == 0;
}

int start_server(const char* log) {
  if (nvidia_driver_seen()) {
    std::printf("preloaded frugal: an NVIDIA driver is present; commands run in their own processes\n");
    return 0;
  }
  stop_server();  // one left by an earlier run of this build
  for (int i = 0; i < 100; ++i) {  // it ends once its running commands have
    const int s = connect_server();
    if (s < 0) break;
    ::close(s);
    ::usleep(100 * 1000);
  }
  const pid_t first = ::fork();
  if (first == 0) {
    ::setsid();  // its own session: CTest does not wait for it, and a test's kill of its
                 // process group does not reach it
    if (::fork() != 0) std::_Exit(0);
    const int out = ::open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0) std::_Exit(1);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::setenv("LD_PRELOAD", kServerLibrary, 1);
    ::setenv("FRUGAL_PRELOADED_SERVE", server_name(), 1);
    // Room for each command's line in the server's argument strings (server.cpp, set_title).
    const std::string room(8192, '_');
    char* args[] = {const_cast<char*>(kFrugal), const_cast<char*>(room.c_str()), nullptr};
    ::execv(kFrugal, args);
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(first, &status, 0);
  for (int i = 0; i < 600; ++i) {  // torch's start-up, up to a minute on a loaded machine
    const int s = connect_server();
    if (s >= 0) {
      ::close(s);
      std::printf("preloaded frugal: serving (%s)\n", log);
      return 0;
    }
    ::usleep(100 * 1000);
  }
  std::printf("preloaded frugal: the server did not start (see %s); commands run in their own "
              "processes\n", log);
  return 0;
}

}  // namespace
}  // namespace frugal::preloaded

int main(int argc, char** argv) {
  using namespace frugal::preloaded;
  if (argc == 3 && std::strcmp(argv[1], "--preloaded-start") == 0) return start_server(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--preloaded-stop") == 0) {
    stop_server();
    return 0;
  }
  run_preloaded(argc, argv);
  exec_frugal(argv);
}
