// The tests' frugal, preloaded (tests/preloaded/): a command run through the client gets the
// results, streams, exit status, folder, umask and limits it would get from build/bin/frugal;
// it runs in a fork of the server that shows the command's line, takes the caller's signals and
// dies with its caller; what a fork cannot take from the caller (a variable read as libraries
// load) runs the plain way.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "support/cli.h"
#include "support/helpers.h"
#include "support/skip.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace preloaded_frugal_test {

fs::path client() { return test::binary_dir() / "tests/preloaded/frugal"; }

// Why these cases cannot run here, or "": a build without the client (sanitizers, a relocated
// bundle), a machine with an NVIDIA driver (the server does not start there).
std::string unavailable(const std::string& said) {
  if (!fs::exists(client())) return "no preloaded frugal in this build (tests/preloaded/)";
  if (said.find("NVIDIA driver") != std::string::npos) {
    return "the preloaded frugal does not start where an NVIDIA driver is present";
  }
  return "";
}

// A server of the test's own (FRUGAL_PRELOADED_SERVER), stopped when the object dies.
class Server {
 public:
  explicit Server(const fs::path& log)
      : env_("FRUGAL_PRELOADED_SERVER=frugal-preloaded-test-" + std::to_string(::getpid()) + " ") {
    const auto r = test::run_command(env_ + test::quote(client().string()) + " --preloaded-start " +
                                     test::quote(log.string()));
    serving_ = r.exit_code == 0 && r.out.find("preloaded frugal: serving") != std::string::npos;
    said_ = r.out + r.err;
  }
  ~Server() { test::run_command(env_ + test::quote(client().string()) + " --preloaded-stop"); }
  bool serving() const { return serving_; }
  const std::string& said() const { return said_; }
  // `frugal` through this server, as a shell command's start.
  std::string frugal() const { return env_ + test::quote(client().string()); }

 private:
  std::string env_;
  bool serving_ = false;
  std::string said_;
};

// A case's temporary folder, a server of its own logging there, and `config` (a tiny GPT
// training `steps` steps) written there.
struct Served {
  test::TempDir dir;
  Server server;
  Served(const char* name, const std::string& config, int steps)
      : dir(name), server(dir / "server.log") {
    test::write_text(dir / config, test::tiny_gpt_yaml("runs", "x", steps));
  }
};

// True (the case skipped) where the server cannot run here; else it must be serving.
bool skipped_here(const Served& served) {
  INFO(served.server.said());
  if (const std::string why = unavailable(served.server.said()); !why.empty()) {
    return test::skip(why);
  }
  REQUIRE(served.server.serving());
  return false;
}

// The frugal processes (build/bin/frugal's image, not the client's) whose line mentions `text`.
std::vector<test::Process> frugal_processes(const std::string& text) {
  std::vector<test::Process> found;
  for (const test::Process& p : test::processes_mentioning(text)) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/" + std::to_string(p.pid) + "/exe", ec);
    if (!ec && fs::equivalent(exe, test::plain_frugal_binary(), ec)) found.push_back(p);
  }
  return found;
}

int parent_of(int pid) {
  const std::string stat = test::read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');  // the command's name may hold spaces
  return std::stoi(stat.substr(close + 4));  // ") S PPID"
}

template <typename Done>
bool wait_for(Done done, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Starts `command` (a shell command line's start, e.g. a client) training `run` in the
// background in `dir`; the caller's pid lands in RUN.pid, its exit status in RUN.rc.
void start_training(const fs::path& dir, const std::string& command, const std::string& run) {
  const auto r = test::run_command(
      "cd " + test::quote(dir.string()) + " && (" + command + " train long.yaml --set run.name=" +
      run + " >" + run + ".log 2>&1 & echo $! >" + run + ".pid; wait $!; echo $? >" + run +
      ".rc) >/dev/null 2>&1 &");
  REQUIRE(r.exit_code == 0);
  REQUIRE(wait_for([&] { return fs::exists(dir / "runs" / run / "metrics.jsonl"); }, 60));
}

int pid_of(const fs::path& dir, const std::string& run) {
  return std::stoi(test::read_text(dir / (run + ".pid")));
}

}  // namespace preloaded_frugal_test

using namespace preloaded_frugal_test;

TEST_CASE("preloaded frugal: a command gets the binary's results, streams, exit status, folder, "
          "umask and limits",
          "[integration][preloaded]") {
  const Served served("frugal-preloaded", "t.yaml", 6);
  if (skipped_here(served)) return;
  const auto& [dir, server] = served;
  const std::string cd = "cd " + test::quote(dir.path().string()) + " && umask 077 && ";
  const std::string plain = test::quote(test::plain_frugal_binary());

  const auto ours = test::run_command(cd + plain + " train t.yaml --set run.name=plain");
  const auto forked = test::run_command(cd + server.frugal() + " train t.yaml --set run.name=forked");
  INFO(ours.err << forked.err);
  REQUIRE(ours.exit_code == 0);
  REQUIRE(forked.exit_code == 0);
  CHECK_THAT(forked.out, Catch::Contains("step 6/6"));
  const auto a = test::step_rows(dir / "runs/plain/metrics.jsonl");
  const auto b = test::step_rows(dir / "runs/forked/metrics.jsonl");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i]["loss"] == a[i]["loss"]);
  CHECK(fs::status(dir / "runs/forked/metrics.jsonl").permissions() ==
        fs::status(dir / "runs/plain/metrics.jsonl").permissions());
  CHECK((fs::status(dir / "runs/forked/metrics.jsonl").permissions() & fs::perms::group_read) ==
        fs::perms::none);

  // A user's error: the same one line on stderr, the same exit status.
  const auto wrong = test::run_command(cd + plain + " trian");
  const auto wrong_forked = test::run_command(cd + server.frugal() + " trian");
  CHECK(wrong.exit_code == 2);
  CHECK(wrong_forked.exit_code == wrong.exit_code);
  CHECK(wrong_forked.err == wrong.err);
  CHECK(wrong_forked.out == wrong.out);

  // A file-size limit of 1 block: the run's first checkpoint exceeds it, and the signal that
  // ends the binary (SIGXFSZ) ends the client the same way.
  const auto limited = test::run_command(cd + "ulimit -f 1 && " + plain +
                                         " train t.yaml --set run.name=limited");
  const auto limited_forked = test::run_command(cd + "ulimit -f 1 && " + server.frugal() +
                                                " train t.yaml --set run.name=limited_forked");
  CHECK(limited.exit_code != 0);
  CHECK(limited_forked.exit_code == limited.exit_code);
}

TEST_CASE("preloaded frugal: the command runs in a fork that shows its line, takes its caller's "
          "signals and dies with it; what a fork cannot take runs plainly",
          "[integration][preloaded]") {
  const Served served("frugal-preloaded-signals", "long.yaml", 1000000);
  if (skipped_here(served)) return;
  const auto& [dir, server] = served;
  // Run names of this process's own: other test files run beside this one.
  const std::string term = "term" + std::to_string(::getpid());
  const std::string killed = "killed" + std::to_string(::getpid());
  const std::string plain = "plain" + std::to_string(::getpid());
  struct KillLeftovers {  // a failed check must not leave a training running
    std::vector<std::string> runs;
    ~KillLeftovers() {
      for (const std::string& run : runs) test::kill_processes_mentioning("run.name=" + run);
    }
  } leftovers{{term, killed, plain}};

  // In a fork of the server: one frugal process with the command's line, not the caller's.
  start_training(dir.path(), server.frugal(), term);
  const int caller = pid_of(dir.path(), term);
  auto found = frugal_processes("run.name=" + term);
  REQUIRE(found.size() == 1);
  CHECK(found[0].pid != caller);
  CHECK(parent_of(found[0].pid) != caller);
  CHECK_THAT(found[0].command_line, Catch::Contains("train long.yaml --set run.name=" + term));
  // SIGTERM to the caller reaches the command; the caller exits as the binary does (143).
  REQUIRE(::kill(caller, SIGTERM) == 0);
  REQUIRE(wait_for([&] { return fs::exists(dir / (term + ".rc")); }, 60));
  CHECK(test::read_text(dir / (term + ".rc")) == "143\n");
  CHECK(frugal_processes("run.name=" + term).empty());

  // A caller killed (a test's timeout, kill -9) takes its command along.
  start_training(dir.path(), server.frugal(), killed);
  REQUIRE(frugal_processes("run.name=" + killed).size() == 1);
  REQUIRE(::kill(pid_of(dir.path(), killed), SIGKILL) == 0);
  CHECK(wait_for([&] { return frugal_processes("run.name=" + killed).empty(); }, 10));

  // A variable the libraries read as they load (OpenMP's) differs from the server's: the client
  // becomes the binary itself.
  start_training(dir.path(), "OMP_DISPLAY_ENV=false " + server.frugal(), plain);
  found = frugal_processes("run.name=" + plain);
  REQUIRE(found.size() == 1);
  CHECK(found[0].pid == pid_of(dir.path(), plain));
  REQUIRE(::kill(found[0].pid, SIGTERM) == 0);
  REQUIRE(wait_for([&] { return fs::exists(dir / (plain + ".rc")); }, 60));
  CHECK(test::read_text(dir / (plain + ".rc")) == "143\n");
}
