// The preloaded frugal's messages (client.cpp <-> server.cpp), over a SOCK_SEQPACKET socket in
// Linux's abstract namespace: one request (the command's fields, NUL-separated, with its
// standard streams as SCM_RIGHTS descriptors), then the server's replies "plain" (run it
// yourself), or "pid N" followed by "exit STATUS" (waitpid's raw status) when it ends.
#pragma once

#include <sys/resource.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace frugal::preloaded {

inline constexpr const char* kMagic = "frugal-preloaded-1";
inline constexpr const char* kStop = "stop";
// The limits a shell's `ulimit` sets that a command can notice; the fork takes the caller's.
inline constexpr int kLimits[] = {RLIMIT_AS,    RLIMIT_DATA,   RLIMIT_FSIZE, RLIMIT_NOFILE,
                                  RLIMIT_STACK, RLIMIT_CORE,   RLIMIT_CPU,   RLIMIT_NPROC,
                                  RLIMIT_MEMLOCK};
inline constexpr size_t kMaxMessage = 1 << 20;

inline sockaddr_un address(const std::string& name, socklen_t& length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';  // abstract: no file to clean up
  const size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

inline std::string pack(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) {
    out += f;
    out += '\0';
  }
  return out;
}

inline std::vector<std::string> unpack(const std::string& message) {
  std::vector<std::string> fields;
  size_t at = 0;
  while (at < message.size()) {
    const size_t end = message.find('\0', at);
    if (end == std::string::npos) break;
    fields.push_back(message.substr(at, end - at));
    at = end + 1;
  }
  return fields;
}

// Which variables a fork cannot take from the caller: those read while the libraries load,
// before main (OpenMP's and the allocator's settings, the loader's, FRUGAL_CUDA in libfrugal's
// constructor, torch's and the sanitizers'). A request whose values differ from the server's
// runs the plain way.
inline bool read_at_load(const std::string& entry) {
  static const char* const prefixes[] = {
      "LD_",    "OMP_",      "GOMP_",      "KMP_",  "MKL_",  "OPENBLAS_", "MALLOC_",
      "GLIBC_", "TORCH_",    "PYTORCH_",   "CUDA_", "NCCL_", "DNNL_",     "ONEDNN_",
      "ASAN_",  "UBSAN_",    "LSAN_",      "TSAN_", "FRUGAL_CUDA="};
  for (const char* p : prefixes) {
    if (entry.compare(0, std::strlen(p), p) == 0) return true;
  }
  return false;
}

// What a process carries that a fork cannot take from its caller: a seccomp policy (test_doctor
// refuses io_uring so), the privileges, CPUs, namespaces and cgroup, the nice value. Where the
// caller's differ from the server's, the command runs the plain way.
inline std::string process_attributes() {
  std::string out;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    for (const char* key : {"Seccomp:", "Seccomp_filters:", "NoNewPrivs:", "CapEff:", "CapBnd:",
                            "Cpus_allowed_list:"}) {
      if (line.rfind(key, 0) == 0) out += line + "\n";
    }
  }
  for (const char* ns : {"net", "mnt", "pid", "user", "uts", "ipc", "cgroup"}) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/ns/") + ns;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    out += std::string(ns) + " " + (n > 0 ? std::string(target, static_cast<size_t>(n)) : "") + "\n";
  }
  std::ifstream cgroup("/proc/self/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  out += text.str();
  out += "nice " + std::to_string(::getpriority(PRIO_PROCESS, 0)) + "\n";
  return out;
}

}  // namespace frugal::preloaded
