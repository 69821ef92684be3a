#include "flat_param.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/autograd.h>

namespace frugal::dist {

void free_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

bool has_storage(const at::Tensor& t) { return t.storage().nbytes() > 0; }

FlatParam FlatParam::build(std::string name, size_t group, std::vector<at::Tensor> params,
                           std::vector<std::string> names, int world, int rank,
                           at::ScalarType param_dtype, at::ScalarType reduce_dtype,
                           bool shard_is_view, bool keep_full_grad,
                           const c10::optional<at::TensorOptions>& shard_on_host) {
  torch::NoGradGuard no_grad;
  FlatParam f;
  f.name = std::move(name);
  f.group = group;
  f.frozen = group == kFrozen;
  f.params = std::move(params);
  f.names = std::move(names);
  f.param_dtype = param_dtype;
  f.reduce_dtype = reduce_dtype;
  for (const auto& p : f.params) {
    f.offsets.push_back(f.numel);
    f.numel += p.numel();
  }
  f.shard_numel = (f.numel + world - 1) / world;
  f.padded = f.shard_numel * world;
  const at::Tensor& first = f.params.front();
  const at::ScalarType own_dtype = first.scalar_type();
  f.full = at::zeros({f.padded}, first.options().dtype(param_dtype).requires_grad(false));
  for (size_t i = 0; i < f.params.size(); ++i) {
    at::Tensor& p = f.params[i];
    at::Tensor view = f.full.narrow(0, f.offsets[i], p.numel()).view(p.sizes());
    // A parameter without values yet (models/materialize.h) leaves zeros, loaded later.
    if (has_storage(p) || p.numel() == 0) view.copy_(p.detach());
    // The parameter keeps its identity (module, autograd) and computes on the flat buffer.
    p.set_data(view);
  }
  at::Tensor mine = f.full.narrow(0, static_cast<int64_t>(rank) * f.shard_numel, f.shard_numel);
  if (shard_on_host) {
    f.shard = mine.to(shard_on_host->dtype(own_dtype), /*non_blocking=*/false, /*copy=*/true);
  } else {
    f.shard = shard_is_view ? mine.detach() : mine.to(own_dtype, /*non_blocking=*/false, /*copy=*/true);
  }
  if (f.frozen) return f;
  f.shard.requires_grad_(true);
  if (keep_full_grad) {
    f.grad_full = at::zeros({f.padded}, f.full.options());
    for (size_t i = 0; i < f.params.size(); ++i) {
      at::Tensor& p = f.params[i];
      p.mutable_grad() = f.grad_full.narrow(0, f.offsets[i], p.numel()).view(p.sizes());
    }
  }
  // zero1 (whole gradients kept, same dtype): the shard's gradient is this rank's slice of
  // them, overwritten by the reduced values; otherwise a buffer of its own.
  if (keep_full_grad && f.full.scalar_type() == own_dtype && !shard_on_host) {
    f.grad_shard = f.grad_full.narrow(0, static_cast<int64_t>(rank) * f.shard_numel, f.shard_numel);
  } else {
    f.grad_shard = at::zeros({f.shard_numel}, f.shard.options().requires_grad(false));
  }
  f.shard.mutable_grad() = f.grad_shard;
  return f;
}

void FlatParam::start_gather(Communicator& comm, bool async) {
  if (!has_storage(full)) allocate_storage(full);
  // The input must not alias the output (zero1/2 shards are views of `full`).
  gather_input = shard.detach().to(full.options().dtype(param_dtype), /*non_blocking=*/false,
                                   /*copy=*/true);
  gathering = comm.all_gather(full, gather_input, async, name);
  if (!async) gather_input = at::Tensor();
}

void FlatParam::wait_gather() {
  gathering.wait();
  gathering = Work();
  gather_input = at::Tensor();
}

void FlatParam::start_reduce(Communicator& comm) {
  torch::NoGradGuard no_grad;
  if (grad_full.defined()) {
    reduce_input = grad_full.to(reduce_dtype);  // no copy when the dtypes agree
  } else {
    reduce_input = at::zeros({padded}, full.options().dtype(reduce_dtype));
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      reduce_input.narrow(0, offsets[i], p.numel()).copy_(p.grad().reshape({-1}));
      // Whole gradients live only until they are flattened: that is zero2's saving.
      p.mutable_grad() = at::Tensor();
    }
  }
  reduce_output = at::empty({shard_numel}, reduce_input.options());
  reducing = comm.reduce_scatter(reduce_output, reduce_input, /*async=*/true, name);
}

void FlatParam::finish_reduce(Communicator* replicas) {
  if (!reducing.pending()) return;
  reducing.wait();
  reducing = Work();
  if (replicas != nullptr && replicas->size() > 1) {
    replicas->all_reduce(reduce_output, Reduce::kSum, /*async=*/false, name);
  }
  const bool slice_of_full = grad_full.defined() && grad_shard.storage().is_alias_of(grad_full.storage());
  if (slice_of_full) {
    grad_shard.copy_(reduce_output);  // the slice held this rank's own sum: replace it
  } else {
    grad_shard.add_(reduce_output.to(grad_shard.options()));
  }
  reduce_input = at::Tensor();
  reduce_output = at::Tensor();
}

}  // namespace frugal::dist
