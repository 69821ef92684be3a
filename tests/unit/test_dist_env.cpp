// Rank discovery from each launcher's environment variables.
#include <catch2/catch.hpp>

#include <map>

#include "frugal/distributed/env.h"
#include "frugal/util/error.h"

using frugal::dist::first_slurm_host;
using frugal::dist::rank_info_from_env;
using frugal::dist::RankInfo;

namespace {

RankInfo with(std::map<std::string, std::string> env) {
  return rank_info_from_env([env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

}  // namespace

TEST_CASE("no launcher: a single process", "[unit][dist]") {
  RankInfo i = with({});
  CHECK(i.launcher == "none");
  CHECK(i.rank == 0);
  CHECK(i.world_size == 1);
  CHECK_FALSE(i.distributed());
  CHECK(i.master_addr == "127.0.0.1");
  CHECK(i.master_port == 29500);
}

TEST_CASE("torchrun / frugal launch variables", "[unit][dist]") {
  RankInfo i = with({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                     {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(i.launcher == "torchrun");
  CHECK(i.rank == 3);
  CHECK(i.world_size == 8);
  CHECK(i.local_rank == 1);
  CHECK(i.local_world_size == 2);
  CHECK(i.master_addr == "node7");
  CHECK(i.master_port == 1234);
  CHECK(i.agent_store);
  CHECK_FALSE(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).agent_store);
}

TEST_CASE("OpenMPI, PMI and Slurm variables", "[unit][dist]") {
  RankInfo mpi = with({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK(mpi.launcher == "mpi");
  CHECK((mpi.rank == 2 && mpi.world_size == 4 && mpi.local_rank == 0 && mpi.local_world_size == 2));
  CHECK(mpi.master_addr == "127.0.0.1");

  RankInfo pmi = with({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"},
                       {"MPI_LOCALNRANKS", "3"}, {"MASTER_PORT", "4000"}});
  CHECK(pmi.launcher == "pmi");
  CHECK((pmi.rank == 1 && pmi.world_size == 3 && pmi.local_rank == 1));
  CHECK(pmi.master_port == 4000);

  RankInfo slurm = with({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                         {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                         {"SLURM_JOB_NODELIST", "gpu[03-05,07],cpu1"}});
  CHECK(slurm.launcher == "slurm");
  CHECK((slurm.rank == 5 && slurm.world_size == 8 && slurm.local_rank == 1));
  CHECK(slurm.local_world_size == 4);
  CHECK(slurm.master_addr == "gpu03");

  // torchrun's variables win over a surrounding Slurm allocation's.
  CHECK(with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})
            .launcher == "torchrun");
}

TEST_CASE("Slurm node lists", "[unit][dist]") {
  CHECK(first_slurm_host("node1") == "node1");
  CHECK(first_slurm_host("node1,node2") == "node1");
  CHECK(first_slurm_host("gpu[003-010]") == "gpu003");
  CHECK(first_slurm_host("a[1,4],b2") == "a1");
}

TEST_CASE("malformed or inconsistent variables name the variable", "[unit][dist][bad_input]") {
  CHECK_THROWS_WITH(with({{"RANK", "two"}, {"WORLD_SIZE", "4"}}),
                    "environment: RANK='two' is not an integer >= 0");
  CHECK_THROWS_WITH(with({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
                    "environment: RANK=4 must be below WORLD_SIZE=4");
  CHECK_THROWS_WITH(with({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "0"}}),
                    "environment: OMPI_COMM_WORLD_SIZE='0' is not an integer >= 1");
  CHECK_THROWS_WITH(with({{"MASTER_PORT", "70000"}}),
                    "environment: MASTER_PORT=70000 is not a TCP port (1-65535)");
  CHECK_THROWS_AS(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"},
                        {"LOCAL_WORLD_SIZE", "2"}}),
                  frugal::Error);
}
