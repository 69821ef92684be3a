#include "job_agreement.h"

#include <fmt/format.h>

#include <string>
#include <thread>
#include <vector>

#include "frugal/util/error.h"

namespace frugal::dist::detail {
namespace {

constexpr const char* kJobWorldKey = "job/world_size";
constexpr const char* kJobRefusedKey = "job/refused";
constexpr const char* kJobJoinedKey = "job/joined";

std::vector<uint8_t> store_bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string store_text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

}  // namespace

void agree_on_job(c10d::Store& store, const RankInfo& info, std::chrono::milliseconds timeout) {
  const std::string mine = std::to_string(info.world_size);
  if (info.rank == 0) store.set(kJobWorldKey, store_bytes(mine));
  std::string theirs;
  try {
    theirs = store_text(store.get(kJobWorldKey));  // waits for rank 0, up to the store's timeout
  } catch (const std::exception&) {
    throw Error(fmt::format(
        "distributed: rank {}: rank 0 did not say the job's size at {}:{} within {} s "
        "(distributed.timeout_s); it did not start, or cannot be reached",
        info.rank, info.master_addr, info.master_port, timeout.count() / 1000.0));
  }
  if (theirs != mine) {
    const std::string why = fmt::format(
        "distributed: rank {} was started for a job of {} ranks, rank 0 for a job of {}: the "
        "launches disagree (every node's frugal launch needs the same --nnodes and "
        "--nproc-per-node; under torchrun, mpirun or Slurm the same world size)",
        info.rank, mine, theirs);
    store.set(kJobRefusedKey, store_bytes(why));
    throw Error(why);
  }
  store.add(kJobJoinedKey, 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (store.check({kJobRefusedKey})) {
      throw Error(fmt::format("{} (rank {} ends with it)", store_text(store.get(kJobRefusedKey)), info.rank));
    }
    const int64_t joined = store.add(kJobJoinedKey, 0);
    if (joined >= info.world_size) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(fmt::format(
          "distributed: rank {}: {} of {} ranks joined at {}:{} within {} s "
          "(distributed.timeout_s); the others did not start, or cannot reach that address",
          info.rank, joined, info.world_size, info.master_addr, info.master_port,
          timeout.count() / 1000.0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace frugal::dist::detail
