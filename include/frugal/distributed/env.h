// Who this process is in a multi-process job, read from whichever launcher started it:
//   torchrun / frugal launch  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//                             MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE
//   OpenMPI (mpirun)          OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
//   MPICH / Intel MPI (PMI)   PMI_RANK, PMI_SIZE (MPI_LOCALRANKID, MPI_LOCALNRANKS)
//   Slurm (srun)              SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                             SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST / SLURM_NODELIST
// This is the one place the library reads a launcher's environment; the CLI calls it and
// passes the result on (Trainer, init_from_env), and so can embedding code.
// The first launcher whose variables are set wins, in that order; none set means a single
// process (rank 0 of 1). MASTER_ADDR / MASTER_PORT, when set, override what is derived (MPI
// and PMI jobs default to 127.0.0.1, Slurm to the first host of the node list; port 29500).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace frugal::dist {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // torchrun's agent already serves the TCP store at MASTER_ADDR:MASTER_PORT: every rank
  // connects to it as a client (rank 0 does not start one).
  bool agent_store = false;
  std::string launcher = "none";  // torchrun | mpi | pmi | slurm | none
  // torchrun's restart of the job (TORCHELASTIC_RESTART_COUNT): keys of the store are kept
  // apart per attempt.
  int restart_count = 0;
  // `frugal launch` prefixes each rank's output lines with its rank
  // (FRUGAL_LAUNCHER_TAGS_RANKS): the logger need not.
  bool launcher_tags_ranks = false;

  bool distributed() const { return world_size > 1; }
};

// Reads the environment through `getenv` (the process environment by default; tests pass a
// map). Inconsistent or malformed values (RANK outside [0, WORLD_SIZE), a port that is not a
// number) are a frugal::Error naming the variable and what was expected.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
RankInfo rank_info_from_env(const EnvLookup& getenv = {});

// The first host of a Slurm node list: "gpu[03-05,07],cpu1" -> "gpu03".
std::string first_slurm_host(const std::string& nodelist);

// A TCP port on 127.0.0.1 that the kernel reports free right now, for a master port that was
// left to chance (`frugal launch --master-port 0`). Another process may take it before it is
// bound again; a frugal::Error when no socket can be bound at all.
int free_loopback_port();

}  // namespace frugal::dist
