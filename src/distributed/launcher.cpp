#include "frugal/distributed/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "frugal/distributed/env.h"
#include "frugal/util/error.h"
#include "rank_processes.h"

extern char** environ;

namespace frugal::dist {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_signal = 0;
void remember_signal(int sig) { g_signal = sig; }

void say(const std::string& line) { write_all(STDERR_FILENO, "frugal launch: " + line + "\n"); }

// --master-port 0: a free port on this host, or what the user can do instead.
int free_port_or_explain() {
  try {
    return free_loopback_port();
  } catch (const Error& e) {
    throw Error(fmt::format("launch: {} (pass --master-port)", e.what()));
  }
}

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("launch: cannot locate the frugal executable (/proc/self/exe)");
  return p.string();
}

bool is_frugal_command(const LaunchOptions& o) {
  const std::string& first = o.command.front();
  return first.find('/') == std::string::npos &&
         (o.frugal_commands.empty() || std::find(o.frugal_commands.begin(), o.frugal_commands.end(),
                                                 first) != o.frugal_commands.end());
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// A bare program name, as a shell finds it: the first executable file of that name in PATH's
// folders. A name found only in the working folder is not run (a shell would not either):
// the error says to write ./NAME.
std::string program_on_path(const LaunchOptions& o) {
  const std::string& name = o.command.front();
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (!dir.empty() && executable_file(candidate)) return candidate;
    start = end + 1;
  }
  if (executable_file(name)) {
    throw Error(
        fmt::format("launch: '{}' is not on PATH; to run the one in this folder, write "
                    "'./{}'",
                    name, name));
  }
  std::string known;
  for (const auto& c : o.frugal_commands) known += (known.empty() ? "" : ", ") + c;
  throw Error(fmt::format("launch: '{}' is neither a frugal command ({}) nor a program on PATH",
                          name, known));
}

Job job_for(const LaunchOptions& o, int attempt) {
  Job job;
  if (!is_frugal_command(o)) {
    job.program =
        o.command.front().find('/') != std::string::npos ? o.command.front() : program_on_path(o);
    job.args = o.command;
    return job;
  }
  // A frugal subcommand: run this very executable.
  job.program = o.frugal_executable.empty() ? self_executable() : o.frugal_executable;
  job.args.push_back("frugal");
  job.args.insert(job.args.end(), o.command.begin(), o.command.end());
  // A restarted training job continues from its newest checkpoint instead of refusing the
  // run directory its first attempt created.
  if (attempt > 0 && o.command.front() == "train") {
    job.args.push_back("--set");
    job.args.push_back("run.resume=auto");
  }
  return job;
}

std::vector<std::string> environment_for(const LaunchOptions& o, int local_rank, int port,
                                         int attempt) {
  const int world = o.nnodes * o.nproc_per_node;
  std::map<std::string, std::string> set = {
      {"RANK", std::to_string(o.node_rank * o.nproc_per_node + local_rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      // The launcher tags every line with its rank: the ranks' logs need not tag them again.
      {"FRUGAL_LAUNCHER_TAGS_RANKS", "1"},
  };
  // Share the cores instead of every rank taking all of them (torchrun sets 1; the ranks'
  // share is closer to what a CPU job wants). A value the user set is kept.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    set["OMP_NUM_THREADS"] =
        std::to_string(std::max(1u, cores / static_cast<unsigned>(o.nproc_per_node)));
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (!set.contains(key)) env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

struct Outcome {
  int code = 0;
  int failed_rank = -1;
  int signal = 0;          // a signal the launcher received and forwarded
  std::string last_error;  // the failed rank's last line on stderr
};

Outcome run_attempt(const LaunchOptions& o, int attempt) {
  const int port = o.master_port == 0 ? free_port_or_explain() : o.master_port;
  const Job job = job_for(o, attempt);
  std::vector<Child> children;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    children.push_back(spawn(job, environment_for(o, local, port, attempt),
                             o.node_rank * o.nproc_per_node + local, o.out_fd, o.err_fd));
  }
  Outcome outcome;
  std::optional<Clock::time_point> kill_at;
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
  for (;;) {
    pump(children, 50);
    reap(children);
    if (g_signal != 0 && outcome.signal == 0) {
      outcome.signal = g_signal;
      say(fmt::format("received signal {}; forwarding it to every rank", int(g_signal)));
      signal_all(children, g_signal);
      kill_at = Clock::now() + grace;
    }
    if (outcome.failed_rank < 0 && outcome.signal == 0) {
      for (const auto& c : children) {
        if (!c.running && c.exit_code != 0) {
          outcome.failed_rank = c.rank;
          outcome.code = c.exit_code;
          say(fmt::format("rank {} exited with code {}; stopping the other ranks", c.rank,
                          c.exit_code));
          signal_all(children, SIGTERM);
          kill_at = Clock::now() + grace;
          break;
        }
      }
    }
    if (kill_at && Clock::now() >= *kill_at && any_running(children)) {
      say(fmt::format("ranks still running {:.0f} s after SIGTERM: sending SIGKILL", o.grace_s));
      signal_all(children, SIGKILL);
      kill_at.reset();
    }
    const bool streams_open = std::any_of(children.begin(), children.end(), [](const Child& c) {
      return c.out.fd >= 0 || c.err.fd >= 0;
    });
    if (!any_running(children) && !streams_open) break;
    // A rank's own children may hold its pipes open after it exited: stop reading then.
    if (!any_running(children) && streams_open) {
      pump(children, 200);
      for (auto& c : children) {
        for (Stream* s : {&c.out, &c.err}) s->close_now(fmt::format("[rank {}] ", c.rank));
      }
    }
  }
  if (outcome.signal != 0) outcome.code = 128 + outcome.signal;
  for (const auto& c : children) {
    if (c.rank == outcome.failed_rank) outcome.last_error = c.err.last_line;
  }
  return outcome;
}

}  // namespace

int launch(const LaunchOptions& o) {
  if (o.command.empty()) throw Error("launch: no command (e.g. frugal launch -- train cfg.yaml)");
  if (o.nproc_per_node < 1) throw Error("launch: --nproc-per-node must be >= 1");
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw Error("launch: --node-rank must be in [0, --nnodes)");
  }
  if (o.master_port < 0 || o.master_port > 65535)
    throw Error("launch: --master-port must be 0-65535");
  if (o.master_port == 0 && o.nnodes > 1) {
    throw Error("launch: --master-port 0 (a free port) only works on one node; give the port");
  }
  // A program path that cannot run is the command line's mistake: one line and exit 2 here,
  // rather than every rank's exec failing with 127 and the launcher's account of it.
  if (!is_frugal_command(o) && o.command.front().find('/') == std::string::npos) {
    (void)program_on_path(o);  // a name found nowhere: said once, here
  }
  if (const std::string& program = o.command.front(); program.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0) {
      throw Error(fmt::format("launch: cannot run '{}': {}", program, std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode) || ::access(program.c_str(), X_OK) != 0) {
      throw Error(fmt::format("launch: cannot run '{}': not an executable file", program));
    }
  }
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  for (int attempt = 0;; ++attempt) {
    const Outcome r = run_attempt(o, attempt);
    if (r.code == 0) return 0;
    if (r.signal != 0) return r.code;
    if (attempt < o.max_restarts) {
      say(fmt::format("restarting all {} ranks (restart {} of {})", o.nproc_per_node, attempt + 1,
                      o.max_restarts));
      continue;
    }
    say(fmt::format(
        "job failed: rank {} exited with code {}{}", r.failed_rank, r.code,
        r.last_error.empty() ? std::string() : fmt::format("; its last words: {}", r.last_error)));
    return r.code;
  }
}

}  // namespace frugal::dist
