// A process group of c10d, PyTorch's own distributed engine (ProcessGroupGloo on CPUs,
// ProcessGroupNCCL on GPUs, rendezvous through a c10d::TCPStore), behind a small interface
// that keeps c10d's headers (and Gloo's / NCCL's) out of everything else.
//
// Every collective counts what it moves, so that benchmarks can compare traffic with theory:
// `payload` is the tensor bytes handed to the collective; `sent` is what each rank sends
// over the wire under the bandwidth-optimal (ring) algorithm: all_reduce 2(N-1)/N x bytes,
// all_gather and reduce_scatter (N-1)/N x the full buffer, broadcast the bytes once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/distributed/env.h"
#include "frugal/distributed/flight_recorder.h"

namespace torch::nn {
class Module;
}

namespace frugal::dist {

// An asynchronous collective; wait() blocks until it has finished (and rethrows its failure,
// a timeout included, as a frugal::Error).
class Work {
 public:
  Work() = default;
  explicit Work(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait();
  bool pending() const { return static_cast<bool>(wait_); }

 private:
  std::function<void()> wait_;
};

struct Traffic {
  int64_t calls = 0;
  int64_t payload_bytes = 0;
  int64_t sent_bytes = 0;
};

enum class Reduce { kSum, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;

  const RankInfo& info() const { return info_; }
  int rank() const { return info_.rank; }
  int size() const { return info_.world_size; }
  bool is_main() const { return info_.rank == 0; }
  // The device this rank computes on (cuda:LOCAL_RANK with NCCL, the CPU with Gloo).
  const c10::Device& device() const { return device_; }
  virtual std::string backend() const = 0;

  // `tag` names what a collective serves ("blocks.3/decay", "bucket 2") in the flight
  // recorder and in distributed.debug's checks.
  // In place; every rank ends with the reduction of all ranks' tensors.
  Work all_reduce(at::Tensor& tensor, Reduce op = Reduce::kSum, bool async = false,
                  std::string_view tag = {});
  // In place; every rank ends with `root`'s tensor.
  void broadcast(at::Tensor& tensor, int root = 0, std::string_view tag = {});
  // output (N * in.numel(), contiguous) = concatenation of every rank's `input`.
  Work all_gather(at::Tensor& output, const at::Tensor& input, bool async = false,
                  std::string_view tag = {});
  // output (in.numel() / N) = this rank's slice of the sum of every rank's `input`.
  Work reduce_scatter(at::Tensor& output, const at::Tensor& input, bool async = false,
                      std::string_view tag = {});
  void barrier();

  // A group of some of this job's ranks, for collectives among them alone (doctor
  // --distributed's within- and across-node figures; hybrid sharding's groups): every member
  // calls it with the same `name`, unique in the job, and the same `members` (job ranks, in the
  // group's rank order; this rank among them). The members meet through the job's store.
  // Ranks outside the group do not call it.
  std::shared_ptr<Communicator> subgroup(const std::string& name, const std::vector<int>& members);

  // This rank's recent collectives (flight_recorder.h).
  const FlightRecorder& flight_recorder() const { return recorder_; }
  // Where a failed collective's dumps go (rank_N.json; the trainer: <run dir>/flight_recorder).
  // Unset, a failure dumps nothing and its error names only this rank's collective.
  void set_flight_recorder_dir(std::filesystem::path dir) { dump_dir_ = std::move(dir); }
  // Writes this rank's dump (`why` in it) and returns the verdict over the dumps there, after
  // waiting up to `wait_s` for the other ranks' (flight_recorder_verdict); "" with no folder.
  std::string dump_flight_recorder(const std::string& why, double wait_s);
  // distributed.debug: before each collective the ranks compare what they are about to run
  // (sequence number, op, dtype, size, tag) and fail at once, naming both sides, when they
  // differ, instead of pairing the wrong collectives or waiting out the timeout.
  void set_debug(bool on) { debug_ = on; }
  bool debug_enabled() const { return debug_; }

  // Traffic by collective name ("all_reduce", ...), since construction or the last reset.
  std::map<std::string, Traffic> traffic() const { return traffic_; }
  void reset_traffic() { traffic_.clear(); }

 protected:
  Communicator(RankInfo info, c10::Device device);
  virtual Work do_all_reduce(at::Tensor& tensor, Reduce op) = 0;
  virtual Work do_broadcast(at::Tensor& tensor, int root) = 0;
  virtual Work do_all_gather(at::Tensor& output, const at::Tensor& input) = 0;
  virtual Work do_reduce_scatter(at::Tensor& output, const at::Tensor& input) = 0;
  virtual Work do_barrier() = 0;
  // `info`: this rank's place in the group (rank and world size within it).
  virtual std::shared_ptr<Communicator> do_subgroup(const std::string& name, RankInfo info) = 0;

 private:
  void count(const std::string& op, int64_t payload, double sent_factor);
  // Issues a collective through `issue` with its record (and distributed.debug's check);
  // the Work it returns finishes the record, and on failure dumps it and names the rank behind.
  Work recorded(const char* op, const at::Tensor* tensor, std::string_view tag,
                const std::function<Work()>& issue);
  void check_same_collective(const char* op, const at::Tensor* tensor, std::string_view tag);
  [[noreturn]] void fail_with_dump(const std::string& message);

  RankInfo info_;
  c10::Device device_;
  std::map<std::string, Traffic> traffic_;
  FlightRecorder recorder_;
  std::filesystem::path dump_dir_;
  bool debug_ = false;
  std::map<std::string, int> groups_made_;  // subgroup(): how many of each name so far
  // FRUGAL_FAULT_SKIP_COLLECTIVE=RANK:SEQ (tests, src/distributed/rank_faults.h): this rank
  // does not issue its collective SEQ, as a rank whose code took another path would not.
  int64_t skip_seq_ = -1;
};

// One number reduced over every rank (a blocking all_reduce of one float64).
double all_reduce_scalar(Communicator& comm, double v, Reduce op = Reduce::kSum);

// Every parameter and buffer of `module` takes `root`'s value, in place (data parallel ranks
// start from the same model whatever each initialised).
void broadcast_module(Communicator& comm, torch::nn::Module& module, int root = 0);

// Joins the job described by the environment (env.h): a TCPStore rendezvous at
// MASTER_ADDR:MASTER_PORT, then a Gloo or NCCL process group (`backend: auto` = NCCL when CUDA
// is available, else Gloo). A collective that does not finish within `timeout_s` fails with
// a frugal::Error instead of hanging. A single process (world size 1) gets a group of one.
std::shared_ptr<Communicator> init_from_env(const DistributedConfig& cfg,
                                            const RankInfo& info);
std::shared_ptr<Communicator> init_from_env(const DistributedConfig& cfg);

// The backend `auto` resolves to here: "nccl" when CUDA is available, else "gloo".
std::string resolve_backend(const std::string& backend);

}  // namespace frugal::dist
