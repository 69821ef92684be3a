// Running multi-process jobs from tests: Gloo on loopback, a free port per job, and a
// timeout on every job so that a hang fails the test instead of blocking CTest.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "support/cli.h"

namespace frugal::test {

inline std::string dist_worker() { return (binary_dir() / "bin" / "frugal_dist_worker").string(); }

// `frugal launch --nproc-per-node N --master-port 0 ARGS...`
inline CommandResult launch(int nproc, const std::string& args, int timeout_s = 120,
                            const std::string& launch_flags = "") {
  return frugal::test::frugal("launch --nproc-per-node " + std::to_string(nproc) + " --master-port 0 " +
                    launch_flags + " -- " + args,
                timeout_s);
}

// The JSON report rank 0 printed last ("[rank 0] {...}" under frugal launch).
inline nlohmann::json rank0_report(const std::string& out) {
  std::string last;
  size_t start = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = out.substr(start, nl - start);
    const std::string tag = "[rank 0] ";
    if (line.rfind(tag, 0) == 0) line = line.substr(tag.size());
    if (!line.empty() && line.front() == '{') last = line;
  }
  return last.empty() ? nlohmann::json() : nlohmann::json::parse(last);
}

// Rank 0's lines of a launch's stdout without their "[rank 0] " prefix: what it printed over
// several lines (doctor --json's object).
inline std::string rank0_text(const std::string& out) {
  std::string text;
  size_t start = 0;
  const std::string tag = "[rank 0] ";
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = out.substr(start, nl - start);
    if (line.rfind(tag, 0) == 0) text += line.substr(tag.size()) + "\n";
  }
  return text;
}

}  // namespace frugal::test
