#include "frugal/distributed/env.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "frugal/util/error.h"

namespace frugal::dist {
namespace {

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int to_int(const std::string& name, const std::string& value, int min) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < min) {
    throw Error(fmt::format("environment: {}='{}' is not an integer >= {}", name, value, min));
  }
  return n;
}

struct Reader {
  const EnvLookup& get;
  std::optional<int> num(const std::string& name, int min) const {
    auto v = get(name);
    if (!v) return std::nullopt;
    return to_int(name, *v, min);
  }
};

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string first;
  int depth = 0;
  for (char ch : nodelist) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) break;
    first.push_back(ch);
  }
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  // "gpu[03-05,07]" -> prefix "gpu" + the first number of the range, zero padding kept.
  std::string range = first.substr(open + 1);
  const auto end = range.find_first_of("-,]");
  return first.substr(0, open) + range.substr(0, end);
}

// Each launcher's variables, in order of precedence. A launcher counts when its rank and size
// are both set; a missing local rank defaults to the rank (one node), except under Slurm,
// whose SLURM_LOCALID is always set by srun.
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // null: derived below
};
constexpr LauncherVars kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

RankInfo rank_info_from_env(const EnvLookup& getenv) {
  const EnvLookup get = getenv ? getenv : EnvLookup(process_env);
  const Reader r{get};
  RankInfo info;
  std::string rank_var = "RANK", size_var = "WORLD_SIZE";
  for (const LauncherVars& v : kLaunchers) {
    if (!get(v.rank) || !get(v.size)) continue;
    const bool slurm = std::string(v.launcher) == "slurm";
    info.launcher = v.launcher;
    rank_var = v.rank, size_var = v.size;
    info.rank = *r.num(v.rank, 0);
    info.world_size = *r.num(v.size, 1);
    info.local_rank = r.num(v.local_rank, 0).value_or(slurm ? 0 : info.rank);
    info.local_world_size =
        v.local_size ? r.num(v.local_size, 1).value_or(info.world_size) : info.world_size;
    break;
  }
  if (info.launcher == "torchrun") {
    const auto agent = get("TORCHELASTIC_USE_AGENT_STORE");
    info.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  } else if (info.launcher == "slurm") {
    // SLURM_NTASKS_PER_NODE may read "4" or "4(x2)": the leading number is this node's count.
    if (auto per_node = get("SLURM_NTASKS_PER_NODE")) {
      info.local_world_size = to_int("SLURM_NTASKS_PER_NODE",
                                     per_node->substr(0, per_node->find('(')), 1);
    }
    auto nodes = get("SLURM_JOB_NODELIST");
    if (!nodes) nodes = get("SLURM_NODELIST");
    if (nodes) info.master_addr = first_slurm_host(*nodes);
  }
  if (info.rank >= info.world_size) {
    throw Error(fmt::format("environment: {}={} must be below {}={}", rank_var, info.rank,
                            size_var, info.world_size));
  }
  if (info.local_rank >= info.local_world_size) {
    throw Error(fmt::format("environment: local rank {} must be below the local world size {}",
                            info.local_rank, info.local_world_size));
  }
  if (auto addr = get("MASTER_ADDR")) info.master_addr = *addr;
  info.restart_count = r.num("TORCHELASTIC_RESTART_COUNT", 0).value_or(0);
  info.launcher_tags_ranks = get("FRUGAL_LAUNCHER_TAGS_RANKS").has_value();
  if (auto port = r.num("MASTER_PORT", 1)) {
    if (*port > 65535) {
      throw Error(fmt::format("environment: MASTER_PORT={} is not a TCP port (1-65535)", *port));
    }
    info.master_port = *port;
  }
  return info;
}

int free_loopback_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) throw Error(fmt::format("cannot open a socket to find a free port: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel picks
  socklen_t len = sizeof addr;
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(s);
  if (!ok) throw Error(fmt::format("cannot bind a socket on 127.0.0.1 to find a free port: {}", std::strerror(err)));
  return ntohs(addr.sin_port);
}

}  // namespace frugal::dist
