// The preloaded Python server the suite runs its reference scripts in
// (tests/python/preloaded_python.py): a script run through it gets the caller's arguments,
// environment, working folder and standard streams, returns its exit status, finds torch
// already imported, and ends when its caller is killed; with no server answering, the client
// runs the venv's python itself, with the same results.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

#include "support/helpers.h"
#include "support/skip.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace preloaded_python_test {

// What a script saw, as it printed it (one JSON line), with its stderr and exit status.
struct Seen {
  nlohmann::json report;
  std::string err;
  int exit_code = -1;
};

// The client, as build/tests/python/python runs it, for a server of the test's own.
std::string client(const std::string& real_python, const std::string& server) {
  return test::quote(real_python) + " -I -S " +
         test::quote((test::source_dir() / "tests/python/preloaded_python.py").string()) +
         " run " + test::quote(server) + " " + test::quote(real_python);
}

Seen run_through(const std::string& real_python, const std::string& server, const fs::path& dir,
                 const fs::path& script) {
  auto r = test::run_command("cd " + test::quote(dir.string()) +
                             " && printf 'from stdin' | FRUGAL_PRELOAD_TEST=seen " +
                             client(real_python, server) + " " + test::quote(script.string()) +
                             " one 'two words'",
                             60);
  INFO(r.out << r.err);
  Seen seen;
  seen.report = nlohmann::json::parse(r.out);
  seen.err = r.err;
  seen.exit_code = r.exit_code;
  return seen;
}

bool alive(int pid) { return ::kill(pid, 0) == 0; }

}  // namespace preloaded_python_test

TEST_CASE("preloaded python: scripts run in a fork with the caller's arguments, environment, "
          "folder and streams",
          "[integration][python]") {
  using namespace preloaded_python_test;
  test::TempDir dir("frugal-preloaded");
  // The venv's python itself (the tests' python is the client; -c runs the real one).
  auto which = test::run_command(test::python() + " -c 'import sys; print(sys.executable, end=\"\")'");
  REQUIRE(which.exit_code == 0);
  const std::string python = which.out;
  const std::string server = "frugal-preload-test-" + std::to_string(::getpid());
  const std::string tool =
      test::quote(python) + " " +
      test::quote((test::source_dir() / "tests/python/preloaded_python.py").string());

  const fs::path script = dir / "report.py";
  test::write_text(script,
                   "import json, os, sys\n"
                   "preloaded = 'torch' in sys.modules\n"
                   "print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(),\n"
                   "                  'env': os.environ.get('FRUGAL_PRELOAD_TEST'),\n"
                   "                  'stdin': sys.stdin.read(), 'preloaded': preloaded}))\n"
                   "print('to stderr', file=sys.stderr)\n"
                   "sys.exit(7)\n");
  auto expect_same = [&](const Seen& seen) {
    CHECK(seen.report["argv"] == nlohmann::json::array({"one", "two words"}));
    CHECK(fs::equivalent(seen.report["cwd"].get<std::string>(), dir.path()));
    CHECK(seen.report["env"] == "seen");
    CHECK(seen.report["stdin"] == "from stdin");
    CHECK(seen.err == "to stderr\n");
    CHECK(seen.exit_code == 7);
  };

  // No server under that name: the venv's python runs the script, torch not yet imported.
  const Seen plain = run_through(python, server, dir.path(), script);
  expect_same(plain);
  CHECK(plain.report["preloaded"] == false);

  auto started = test::run_command(tool + " start " + test::quote(server) + " " +
                                   test::quote((dir / "server.log").string()));
  INFO(started.out << started.err);
  REQUIRE(started.exit_code == 0);
  if (started.out.find("NVIDIA device") != std::string::npos) {
    test::skip("the preloaded server does not start where an NVIDIA device is present");
    return;
  }
  const Seen forked = run_through(python, server, dir.path(), script);
  INFO(test::read_text(dir / "server.log"));
  expect_same(forked);
  CHECK(forked.report["preloaded"] == true);

  // A script whose caller is killed (a test's timeout) ends too.
  const fs::path sleeper = dir / "sleeper.py";
  const fs::path pid_file = dir / "sleeper.pid";
  test::write_text(sleeper, "import os, time\nopen('" + pid_file.string() +
                                "', 'w').write(str(os.getpid()))\ntime.sleep(120)\n");
  auto caller = test::run_command(
      "cd " + test::quote(dir.path().string()) + " && (" + client(python, server) + " " +
      test::quote(sleeper.string()) + " & echo $! > caller.pid; wait) >/dev/null 2>&1 &");
  REQUIRE(caller.exit_code == 0);
  int sleeper_pid = 0;
  for (int i = 0; i < 200 && sleeper_pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(pid_file) && fs::exists(dir / "caller.pid")) {
      const std::string text = test::read_text(pid_file);
      if (!text.empty()) sleeper_pid = std::stoi(text);
    }
  }
  REQUIRE(sleeper_pid > 0);
  CHECK(alive(sleeper_pid));
  const int caller_pid = std::stoi(test::read_text(dir / "caller.pid"));
  CHECK(sleeper_pid != caller_pid);  // the script ran in the server's fork, not in its caller
  REQUIRE(::kill(caller_pid, SIGKILL) == 0);
  bool ended = false;
  for (int i = 0; i < 100 && !ended; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ended = !alive(sleeper_pid);
  }
  CHECK(ended);

  // Stopped: the client falls back to the venv's python again.
  REQUIRE(test::run_command(tool + " stop " + test::quote(server)).exit_code == 0);
  bool stopped = false;
  for (int i = 0; i < 100 && !stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stopped = run_through(python, server, dir.path(), script).report["preloaded"] == false;
  }
  CHECK(stopped);
}
