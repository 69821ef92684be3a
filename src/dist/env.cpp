#include "frugal/dist/env.h"

#include <fmt/format.h>

#include <cstdlib>
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

RankInfo rank_info_from_env(const EnvLookup& getenv) {
  const EnvLookup get = getenv ? getenv : EnvLookup(process_env);
  const Reader r{get};
  RankInfo info;
  std::string rank_var = "RANK", size_var = "WORLD_SIZE";
  if (get("RANK") && get("WORLD_SIZE")) {
    info.launcher = "torchrun";
    info.rank = *r.num("RANK", 0);
    info.world_size = *r.num("WORLD_SIZE", 1);
    info.local_rank = r.num("LOCAL_RANK", 0).value_or(info.rank);
    info.local_world_size = r.num("LOCAL_WORLD_SIZE", 1).value_or(info.world_size);
    const auto agent = get("TORCHELASTIC_USE_AGENT_STORE");
    info.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  } else if (get("OMPI_COMM_WORLD_RANK") && get("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = "mpi";
    rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE";
    info.rank = *r.num(rank_var, 0);
    info.world_size = *r.num(size_var, 1);
    info.local_rank = r.num("OMPI_COMM_WORLD_LOCAL_RANK", 0).value_or(info.rank);
    info.local_world_size = r.num("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(info.world_size);
  } else if (get("PMI_RANK") && get("PMI_SIZE")) {
    info.launcher = "pmi";
    rank_var = "PMI_RANK", size_var = "PMI_SIZE";
    info.rank = *r.num(rank_var, 0);
    info.world_size = *r.num(size_var, 1);
    info.local_rank = r.num("MPI_LOCALRANKID", 0).value_or(info.rank);
    info.local_world_size = r.num("MPI_LOCALNRANKS", 1).value_or(info.world_size);
  } else if (get("SLURM_PROCID") && get("SLURM_NTASKS")) {
    info.launcher = "slurm";
    rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS";
    info.rank = *r.num(rank_var, 0);
    info.world_size = *r.num(size_var, 1);
    info.local_rank = r.num("SLURM_LOCALID", 0).value_or(0);
    // SLURM_NTASKS_PER_NODE may read "4" or "4(x2)": the leading number is this node's count.
    if (auto per_node = get("SLURM_NTASKS_PER_NODE")) {
      info.local_world_size = to_int("SLURM_NTASKS_PER_NODE",
                                     per_node->substr(0, per_node->find('(')), 1);
    } else {
      info.local_world_size = info.world_size;
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
  if (auto port = r.num("MASTER_PORT", 1)) {
    if (*port > 65535) {
      throw Error(fmt::format("environment: MASTER_PORT={} is not a TCP port (1-65535)", *port));
    }
    info.master_port = *port;
  }
  return info;
}

}  // namespace frugal::dist
