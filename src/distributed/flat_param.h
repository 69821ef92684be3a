// One flat, evenly sharded parameter buffer (ZeRO / FSDP): the parameters of one unit that
// share an optimizer parameter group, back to back, padded to a multiple of the world size.
// Rank r owns elements [r * shard_numel, (r + 1) * shard_numel) of it.
//
//   full        [padded] in param_dtype; the model's parameters are views into it (set_data),
//               so the forward and backward run on it. zero3 frees its storage between uses
//               and gathers into the same storage again: views, autograd's saved ones included,
//               stay valid.
//   shard       [shard_numel] in the parameters' own dtype: the leaf the optimizer steps
//               (zero1/2 with param_dtype = own dtype: a view of full's slice, no copy;
//               strategy.offload.params: in host memory, copied to the device to be gathered).
//   grad_shard  the shard's .grad: this rank's slice of the gradient summed over ranks.
//   grad_full   zero1 only: [padded] in param_dtype; the parameters' .grad are views into it.
//
// A frozen flat buffer (zero3: the frozen parameters of a unit, e.g. LoRA's base) has a shard
// and its gathers only: no gradient, no reduce-scatter, no optimizer group, and no place in a
// checkpoint (frozen weights come from where the model was built from).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "frugal/distributed/communicator.h"

namespace frugal::dist {

// Releases a tensor's storage in place (its views stay, pointing at no bytes), and allocates it
// again (uninitialised) through the same allocator.
void free_storage(const at::Tensor& t);
void allocate_storage(const at::Tensor& t);
bool has_storage(const at::Tensor& t);

struct FlatParam {
  std::string name;                  // "blocks.0/decay": unit and optimizer group
  size_t group = 0;                  // optimizer parameter group (none when frozen)
  bool frozen = false;
  std::vector<at::Tensor> params;    // the model's parameters (leaves), in registration order
  std::vector<std::string> names;    // their dotted names in the model
  std::vector<int64_t> offsets;      // where each starts in the flat buffer
  int64_t numel = 0;                 // sum of the parameters' sizes
  int64_t padded = 0;                // numel rounded up to a multiple of the world size
  int64_t shard_numel = 0;           // padded / world size
  at::ScalarType param_dtype = at::kFloat;
  at::ScalarType reduce_dtype = at::kFloat;

  at::Tensor full, shard, grad_shard, grad_full;

  // Collectives in flight, with the buffers they read or write.
  Work gathering;
  at::Tensor gather_input;
  Work reducing;
  at::Tensor reduce_input, reduce_output;

  // Builds the buffers from `params` (their current values), points the parameters at views
  // of `full`, and returns the flat parameter. `shard_is_view`: the shard aliases full's slice.
  // `group` kFrozen: a frozen flat buffer.
  static constexpr size_t kFrozen = static_cast<size_t>(-1);
  static FlatParam build(std::string name, size_t group, std::vector<at::Tensor> params,
                         std::vector<std::string> names, int world, int rank,
                         at::ScalarType param_dtype, at::ScalarType reduce_dtype,
                         bool shard_is_view, bool keep_full_grad,
                         const c10::optional<at::TensorOptions>& shard_on_host = c10::nullopt);

  // Starts gathering every rank's shard into `full` (allocating its storage if freed).
  void start_gather(Communicator& comm, bool async);
  void wait_gather();
  // Starts the reduce-scatter of this micro-step's gradients: zero1 reads grad_full; otherwise
  // the parameters' .grad are flattened (zeros for those without one) and released.
  void start_reduce(Communicator& comm);
  // Waits for it, sums the result over `replicas` (hsdp: the same shard's ranks in the other
  // groups; null: none) and adds it to grad_shard.
  void finish_reduce(Communicator* replicas = nullptr);
};

}  // namespace frugal::dist
