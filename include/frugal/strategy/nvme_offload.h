// Optimizer offload past host memory (strategy.offload.optimizer: nvme), after DeepSpeed's
// ZeRO-Infinity: the fp32 master weights and the optimizer state live in a scratch file on a
// fast local disk, and each step streams them through a bounded ring of host buffers
// (io/record_stream.h): while parameter group i is stepped on the host, group i+1 is being read
// and group i-1 written back, by direct I/O through io_uring (io/direct_io.h). Host memory is
// the ring (strategy.offload.buffer_mb) plus one group's gradients, whatever the state's size.
//
// The file holds one entry per parameter (the master, then each state tensor of
// optim/param_state.h's kinds, 64-byte aligned, the entry padded to 4 KiB), in the optimizer's
// parameter order; a record the ring moves is a run of entries. A parameter larger than a ring
// slot, under an optimizer with element-wise state (Adam, AdamW, SGD), is cut into flat pieces,
// one entry each, stepped one optimizer call per piece with the step count put back, so that
// the ring stays the size asked for (a 50257 x 768 embedding's 463 MB of master and moments
// would otherwise need three slots of that size). The layout is learnt on the
// first step (the optimizer creates its state then): that step takes the parameters one at a
// time, the steps after it stream records. Between steps the masters and the state tensors
// hold no memory (0 elements); bring_state_in() maps them from the file (copy-on-write, read
// through the page cache) for a checkpoint, whose writer streams them without the process
// holding a copy, and the next step lets the mappings go. The file has no name
// (io::DirectFile::unnamed): it is scratch, gone with the process however it ends (a checkpoint
// holds the state to resume).
//
// The arithmetic is the optimizer's own on the same values: a run equals RAM offload's (and the
// plain run's on the CPU) bit for bit.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frugal/strategy/optimizer_update.h"

namespace frugal {
namespace io {
class DirectFile;
class IoEngine;
class RecordStream;
}  // namespace io

struct NvmeOffloadOptions {
  std::filesystem::path dir;             // strategy.offload.nvme_path
  int64_t buffer_bytes = int64_t{64} << 20;  // strategy.offload.buffer_mb: the ring's total
  bool require_direct = false;           // strategy.offload.nvme_require_direct
};

class NvmeOptimizerOffload final : public OptimizerUpdate {
 public:
  // Replaces every parameter of `optimizer`'s groups with a master that lives on disk (before
  // its first step; a stepped optimizer is a frugal::Error). A missing or unwritable directory
  // is a frugal::Error naming it; a filesystem without O_DIRECT is a warning (cached I/O) or,
  // with require_direct, an error.
  NvmeOptimizerOffload(torch::optim::Optimizer& optimizer, const NvmeOffloadOptions& options);
  ~NvmeOptimizerOffload() override;
  NvmeOptimizerOffload(const NvmeOptimizerOffload&) = delete;
  NvmeOptimizerOffload& operator=(const NvmeOptimizerOffload&) = delete;

  void zero_device_grads(bool set_to_none) override;
  // Parameters were written on the device outside the step (a resume, an edit): the masters
  // follow them and the state (now in host memory) is laid out again by the next step.
  void reload_from_device() override;
  // The master for device tensor `p`. A master itself maps to its device tensor: between
  // steps the master is on disk, and the device copy holds its values (in the device's dtype).
  at::Tensor master_of(const at::Tensor& p) const override;
  void bring_state_in() override;
  bool kept_until_step(const at::Tensor& t) const override;
  void hold_state_until(std::shared_future<void> written) override;

  // Figures: the state file's size, the host memory the ring and the gradient scratch take,
  // whether transfers bypass the page cache, the engine's back end, records per step.
  int64_t file_bytes() const;
  int64_t host_buffer_bytes() const;
  bool direct() const;
  const char* backend() const;
  int64_t records() const { return static_cast<int64_t>(records_.size()); }
  // Entries in the file: parameters, with a large one counted once per piece.
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }

 protected:
  void step(torch::optim::Optimizer& optimizer) override;

 private:
  struct Pair {
    at::Tensor device;  // what the model (or the sharding) computes with
    at::Tensor master;  // the optimizer's parameter: fp32 (or wider), on disk between steps
    std::vector<int64_t> sizes;
    at::ScalarType dtype;
    int64_t piece = 0;  // elements per piece when stepped piece by piece (0: whole)
  };
  // A tensor of an entry: where it sits from the entry's start, its shape and dtype.
  struct Placed {
    at::Tensor tensor;  // the optimizer's own (its storage is swapped, the object stays)
    int64_t at = 0;
    std::vector<int64_t> sizes;
    at::ScalarType dtype;
  };
  // One parameter, or a piece of elements [begin, begin + count) of a large one (flat).
  struct Entry {
    size_t pair = 0;
    int64_t begin = 0, count = 0;
    int64_t offset = 0, bytes = 0;  // in the file, 4 KiB aligned
    std::vector<Placed> tensors;    // [0] the master, then the state kinds
  };
  struct Record {
    size_t first = 0, last = 0;  // entries [first, last)
    int64_t offset = 0;
  };

  void lay_out_step(torch::optim::Optimizer& optimizer);  // the first step after a (re)start
  void lay_out_pair(torch::optim::Optimizer& optimizer, size_t i, int64_t& file_end);
  void stream_step(torch::optim::Optimizer& optimizer);
  // steps_: each parameter in pieces' step count before this step.
  void note_steps(torch::optim::Optimizer& optimizer);
  // Whether the model computes on a CUDA device: the ring and the gradient scratch are then
  // page-locked (host_bytes), so that copies to and from the device run by DMA.
  bool on_cuda() const;
  at::Tensor host_bytes(int64_t bytes) const;
  // The device tensor's part an entry stands for (the whole tensor, or a flat slice).
  at::Tensor device_part(const Entry& entry) const;
  // Gradients of `entries` from the device into the scratch, as their masters' .grad.
  void take_gradients(const std::vector<const Entry*>& entries);
  // Steps the masters of `entries` (distinct parameters) and copies them back to the device.
  void step_entries(torch::optim::Optimizer& optimizer, const std::vector<const Entry*>& entries);

  NvmeOffloadOptions options_;
  std::vector<Pair> pairs_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;         // by device tensor
  std::unordered_map<const c10::TensorImpl*, size_t> master_index_;  // by master
  std::unique_ptr<io::DirectFile> file_;
  std::unique_ptr<io::IoEngine> engine_;
  std::unique_ptr<io::RecordStream> stream_;
  std::vector<Entry> entries_;  // empty until the first step lays the file out
  std::vector<Record> records_;
  at::Tensor grad_scratch_;     // bytes: the gradients of one record
  std::vector<int64_t> steps_;  // per pair, the step count before this step (pieces put it back)
  bool state_in_memory_ = false;  // bring_state_in ran since the last step
  bool state_mapped_ = false;     // ... and the state's tensors map the file
  std::unordered_set<const void*> mapped_;  // the storages of those tensors
  std::shared_future<void> held_;  // an asynchronous checkpoint still reading the mappings
};

}  // namespace frugal
