#include "support/helpers.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>
#include <stdexcept>

#include "frugal/distributed/env.h"
#include "frugal/io/remove_tree.h"

namespace fs = std::filesystem;

namespace frugal::test {

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  path_ = fs::temp_directory_path() /
          (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(now % 1000000));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  try {
    io::remove_tree(path_);  // not fs::remove_all: see frugal/io/remove_tree.h
  } catch (...) {
  }
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandResult run_command(const std::string& command_line, int timeout_s) {
  TempDir scratch("frugal-cmd");
  const fs::path out = scratch / "out", err = scratch / "err";
  const std::string full = "timeout " + std::to_string(timeout_s) + " sh -c " +
                           quote(command_line) + " >" + quote(out.string()) + " 2>" +
                           quote(err.string());
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

namespace {
// The folders baked in at build time, unless the environment names others: the GPU bundle's
// launcher (tools/gpu/bundle.sh) runs this binary far from its build and source trees.
std::string from_env_or(const char* name, const char* built_in) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built_in;
}
}  // namespace

fs::path binary_dir() { return from_env_or("FRUGAL_TEST_BINARY_DIR", FRUGAL_BINARY_DIR); }
// The preloaded frugal's client where CTest set one up (tests/preloaded/), else the binary.
std::string frugal_binary() {
  const char* preloaded = std::getenv("FRUGAL_TEST_FRUGAL");
  if (preloaded != nullptr && *preloaded != '\0') return preloaded;
  return plain_frugal_binary();
}
std::string plain_frugal_binary() { return (binary_dir() / "bin" / "frugal").string(); }
std::string python() { return from_env_or("FRUGAL_TEST_PYTHON", FRUGAL_PYTHON); }
fs::path source_dir() { return from_env_or("FRUGAL_TEST_SOURCE_DIR", FRUGAL_SOURCE_DIR); }

int free_port() { return dist::free_loopback_port(); }

std::vector<Process> processes_mentioning(const std::string& text) {
  std::vector<Process> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    // NUL-separated arguments; empty for a zombie, which holds nothing any more.
    std::string args = read_text(entry.path() / "cmdline");
    for (char& c : args) c = c == '\0' ? ' ' : c;
    if (args.find(text) != std::string::npos) found.push_back({pid, args});
  }
  return found;
}

std::vector<Process> kill_processes_mentioning(const std::string& text) {
  const std::vector<Process> found = processes_mentioning(text);
  for (const Process& p : found) ::kill(p.pid, SIGKILL);
  return found;
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace frugal::test
