// Small helpers shared by the tests: scratch directories, running the CLI or Python.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace frugal::test {

// A fresh, empty directory under the system temp folder, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "frugal-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line (with a timeout so a hang fails instead of blocking CTest).
CommandResult run_command(const std::string& command_line, int timeout_s = 600);

// Where the build and the sources are (overridable by FRUGAL_TEST_BINARY_DIR,
// FRUGAL_TEST_SOURCE_DIR and FRUGAL_TEST_PYTHON, for a relocated bundle).
std::filesystem::path binary_dir();
// build/bin/frugal, or the client of its preloaded fork server (tests/preloaded/) that acts as it
// where CTest started one (FRUGAL_TEST_FRUGAL).
std::string frugal_binary();
std::string plain_frugal_binary();  // build/bin/frugal itself, always
std::string python();          // the venv's python (with torch and safetensors), as the client of the
                                // preloaded server (tests/python/preloaded_python.py)
std::filesystem::path source_dir();
std::string quote(const std::string& s);  // single-quoted for /bin/sh

// `python tests/python/SCRIPT ARGS` with the tests' Python (ARGS already shell-quoted).
inline CommandResult python_script(const std::string& script, const std::string& args,
                                   int timeout_s = 600) {
  return run_command(
      python() + " " + quote((source_dir() / "tests/python" / script).string()) + " " + args,
      timeout_s);
}

// A TCP port nothing on this machine listens on now (bound on loopback and released).
int free_port();

// The live processes other than this test's own whose command line mentions `text`: what a
// job left running, when `text` is its unique run directory.
struct Process {
  int pid = 0;
  std::string command_line;  // its arguments joined by spaces
};
std::vector<Process> processes_mentioning(const std::string& text);
// SIGKILLs each of them (a failed check's leftovers must not outlive the test); returns them.
std::vector<Process> kill_processes_mentioning(const std::string& text);

void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

}  // namespace frugal::test
