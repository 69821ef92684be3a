#include "frugal/strategy/activation_offload.h"

#include <torch/utils.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "frugal/models/blocks.h"
#include "frugal/models/unit.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/offload_stream.h"
#include "frugal/strategy/recompute.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"
#include "saved_tensor_hooks.h"

namespace frugal {

struct ActivationOffload::HostCounters {
  std::mutex mutex;
  int64_t current = 0;
  int64_t peak = 0;
};

namespace {

using HostCounters = ActivationOffload::HostCounters;

// Host memory for one copy, with `t`'s sizes and strides. On the CPU it comes from malloc,
// not from torch's CPU allocator (frugal's tracking allocator stands for device memory there);
// with CUDA present, from PyTorch's caching pinned allocator, so copies are asynchronous.
at::Tensor host_like(const at::Tensor& t, bool pinned, const std::shared_ptr<HostCounters>& counters) {
  // What `t`'s sizes and strides span, which is more than its elements for a view such as
  // one head of a packed projection: the copy keeps the strides (so backward's kernels see
  // the layout forward gave them, and gradients stay bit-identical).
  const int64_t bytes = static_cast<int64_t>(
      at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size()));
  {
    std::lock_guard<std::mutex> lock(counters->mutex);
    counters->current += bytes;
    counters->peak = std::max(counters->peak, counters->current);
  }
  auto options = at::TensorOptions().dtype(t.dtype()).device(at::kCPU);
  if (t.is_meta()) {
    // A traced step (memory/meta_trace.h): the host copy holds no data either. Its storage is
    // made here, not by the meta allocator, so that the trace counts it as host memory.
    struct MetaCopy {
      std::shared_ptr<HostCounters> counters;
      int64_t bytes;
    };
    auto release = [](void* ctx) {
      auto* copy = static_cast<MetaCopy*>(ctx);
      {
        std::lock_guard<std::mutex> lock(copy->counters->mutex);
        copy->counters->current -= copy->bytes;
      }
      delete copy;
    };
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(bytes),
                         c10::DataPtr(nullptr, new MetaCopy{counters, bytes}, release,
                                      c10::Device(c10::kMeta)),
                         /*allocator=*/nullptr, /*resizable=*/false);
    at::Tensor copy = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::Meta), t.dtype());
    copy.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides());
    return copy;
  }
  if (pinned) {
    at::Tensor pinned_copy = at::empty_strided(t.sizes(), t.strides(), options.pinned_memory(true));
    // Counted down when the storage goes: a from_blob view whose deleter holds the real one.
    return at::from_blob(
        pinned_copy.data_ptr(), t.sizes(), t.strides(),
        [pinned_copy, counters, bytes](void*) mutable {
          pinned_copy.reset();
          std::lock_guard<std::mutex> lock(counters->mutex);
          counters->current -= bytes;
        },
        options);
  }
  // 64-byte aligned, as torch's own CPU allocations are (vectorised kernels read it).
  const size_t room = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, std::max<size_t>(room, 64));
  if (p == nullptr) {
    throw Error(fmt::format("strategy.offload.activations: cannot allocate {} bytes of host memory",
                            bytes));
  }
  return at::from_blob(
      p, t.sizes(), t.strides(),
      [counters, bytes](void* q) {
        std::free(q);
        std::lock_guard<std::mutex> lock(counters->mutex);
        counters->current -= bytes;
      },
      options);
}

}  // namespace

struct ActivationOffload::Entry {
  int64_t index = 0;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  at::Tensor host;
  std::shared_ptr<offload_stream::Marker> out_done;  // the copy to the host finished
  // The copy back, when prefetched (or kept for another use of the same tensor).
  at::Tensor device_copy;
  std::shared_ptr<offload_stream::Marker> in_done;
  int64_t uses = 1;       // saved tensors sharing this copy (one backward unpacks each once)
  int64_t remaining = 1;  // of those, still to be unpacked in this backward
};

ActivationOffload::ActivationOffload(int64_t prefetch, bool pin_memory)
    : prefetch_(prefetch), pin_memory_(pin_memory), host_(std::make_shared<HostCounters>()) {
  if (prefetch < 0) {
    throw Error("strategy.offload.activation_prefetch: must be >= 0, got " +
                std::to_string(prefetch));
  }
}

ActivationOffload::Handle ActivationOffload::stash(const at::Tensor& t) {
  trace::Range range("offload/activation_out");
  at::NoGradGuard no_grad;  // a copy, not an operation of the model's graph
  auto entry = std::make_shared<Entry>();
  entry->device = t.device();
  const bool cuda = t.is_cuda();
  const bool pinned = cuda && pin_memory_ && offload_stream::pinned_allocator_works();
  entry->host = host_like(t, pinned, host_);
  if (cuda) {
    // After the compute stream produced `t`; `t` stays allocated until the side stream is done.
    const auto produced = offload_stream::mark(t.device());
    entry->out_done = offload_stream::on_side_stream(
        t.device(), produced,
        [&] {
          entry->host.copy_(t, /*non_blocking=*/pin_memory_);
          offload_stream::keep_for_current_stream(t);
        },
        /*wait_host=*/false);
  } else {
    entry->host.copy_(t);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  entry->index = next_index_++;
  // Entries of graphs already freed (earlier micro-steps) leave the front.
  while (!order_.empty() && order_.front().expired()) order_.pop_front();
  order_.push_back(entry);
  ++stats_.copies_out;
  stats_.bytes_out += static_cast<int64_t>(t.nbytes());
  return entry;
}

void ActivationOffload::start_prefetch(Entry& e) {
  trace::Range range("offload/activation_in");
  at::NoGradGuard no_grad;
  // Allocated for the compute stream, written by the side stream once the compute stream got
  // here (its earlier use of that memory is done) and the copy out has finished.
  e.device_copy = at::empty_strided(e.host.sizes(), e.host.strides(),
                                    at::TensorOptions().dtype(e.host.dtype()).device(e.device));
  if (e.device.is_cuda()) {
    offload_stream::wait_on_current(e.device, e.out_done);
    const auto here = offload_stream::mark(e.device);
    e.in_done = offload_stream::on_side_stream(
        e.device, here,
        [&] {
          e.device_copy.copy_(e.host, /*non_blocking=*/pin_memory_);
          offload_stream::keep_for_current_stream(e.device_copy);
        },
        /*wait_host=*/false);
  } else {
    e.device_copy.copy_(e.host);
  }
  ++stats_.copies_in;
}

at::Tensor ActivationOffload::fetch(const Handle& handle) {
  if (!handle) throw std::logic_error("ActivationOffload::fetch: no handle");
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = *handle;
  if (!e.device_copy.defined()) start_prefetch(e);
  offload_stream::wait_on_current(e.device, e.in_done);
  at::Tensor out = e.device_copy;
  if (--e.remaining <= 0) {
    e.device_copy = at::Tensor();  // the caller's reference is the only one now
    e.in_done.reset();
    e.remaining = e.uses;  // another backward (retain_graph) unpacks them all again
  }
  // The entries stashed just before this one are the ones backward reaches next.
  if (prefetch_ > 0) {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      auto other = it->lock();
      if (!other || other->index >= e.index) continue;
      if (other->index < e.index - prefetch_) break;
      if (!other->device_copy.defined()) {
        start_prefetch(*other);
        ++stats_.prefetched;
      }
    }
  }
  return out;
}

ActivationOffloadStats ActivationOffload::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ActivationOffloadStats s = stats_;
  std::lock_guard<std::mutex> lock2(host_->mutex);
  s.host_bytes = host_->current;
  s.host_peak_bytes = host_->peak;
  return s;
}

void ActivationOffload::reset_peak() {
  std::lock_guard<std::mutex> lock(host_->mutex);
  host_->peak = host_->current;
}

namespace {

// The saved tensors of one call of a block, without checkpointing: each goes to the host,
// except the unit's parameters (and views of them: the device holds them anyway) and
// tensors whose layout a copy cannot keep (overlapping strides, e.g. expanded ones).
struct CallStash {
  std::shared_ptr<ActivationOffload> offload;
  std::unordered_set<const void*> parameter_storage;
  // A tensor saved twice shares one copy; the tensor is held until the call returns, so
  // its address is not reused meanwhile.
  std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, ActivationOffload::Handle>> seen;
};

class OffloadHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit OffloadHooks(std::shared_ptr<CallStash> call) : call_(std::move(call)) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    const bool keep = !tensor.has_storage() || tensor.numel() == 0 ||
                      !tensor.is_non_overlapping_and_dense() ||
                      call_->parameter_storage.count(tensor.storage().data()) > 0;
    if (keep) {
      kept_ = tensor;
      call_.reset();
      return;
    }
    auto& slot = call_->seen[tensor.unsafeGetTensorImpl()];
    if (slot.second) {
      ++slot.second->uses;
      ++slot.second->remaining;
    } else {
      slot = {tensor, call_->offload->stash(tensor)};
    }
    handle_ = slot.second;
    offload_ = call_->offload;
    call_.reset();  // the call's bookkeeping ends with the call; the copy stays with handle_
  }
  at::Tensor call_unpack_hook() override { return kept_.defined() ? kept_ : offload_->fetch(handle_); }

 private:
  std::shared_ptr<CallStash> call_;
  at::Tensor kept_;
  std::shared_ptr<ActivationOffload> offload_;
  ActivationOffload::Handle handle_;
};

at::Tensor offload_saved(const std::shared_ptr<ActivationOffload>& offload, Unit& unit,
                         const at::Tensor& x, const UnitFn& inner) {
  // Nothing saved (evaluation), or inside a checkpoint whose hooks take every tensor.
  if (!at::GradMode::is_enabled() || detail::SavedTensorHooksScope::active()) return inner(x);
  auto call = std::make_shared<CallStash>();
  call->offload = offload;
  for (const auto& p : unit.parameters()) {
    if (p.defined() && p.has_storage()) call->parameter_storage.insert(p.storage().data());
  }
  at::Tensor y;
  {
    detail::SavedTensorHooksScope hooks([call] { return std::make_unique<OffloadHooks>(call); });
    y = inner(x);
  }
  call->seen.clear();
  return y;
}

}  // namespace

int64_t apply_activation_offload(torch::nn::Module& model,
                                 const std::shared_ptr<ActivationOffload>& offload,
                                 const std::vector<std::string>& block_lists) {
  if (!offload) throw std::invalid_argument("apply_activation_offload: no offloader");
  std::vector<Unit*> checkpointed;
  std::vector<torch::nn::Module*> all = {&model};
  for (const auto& m : model.modules(/*include_self=*/false)) all.push_back(m.get());
  for (torch::nn::Module* m : all) {
    auto* unit = dynamic_cast<Unit*>(m);
    if (unit != nullptr && unit->has_wrapper(kCheckpointWrapperName)) checkpointed.push_back(unit);
  }
  int64_t changed = 0;
  if (!checkpointed.empty()) {
    // The checkpoint keeps its input on the host.
    for (Unit* unit : checkpointed) {
      unit->set_wrapper(kCheckpointWrapperName, wrap_layer::kCheckpoint,
                        [offload](const at::Tensor& x, const UnitFn& inner) {
                          return checkpoint(inner, x, offload);
                        });
      ++changed;
    }
    log::info(fmt::format("offload.activations: the inputs of {} checkpointed units go to host "
                          "memory (prefetch {})",
                          changed, offload->prefetch()));
    return changed;
  }
  if (block_lists.empty()) {
    throw Error("strategy.offload.activations: the model names no blocks; call "
                "Engine::mark_blocks with the module lists that hold its frugal::Unit blocks");
  }
  for (Block& b : list_blocks(model, block_lists, "offload.activations")) {
    auto* unit = dynamic_cast<Unit*>(b.module.get());
    if (unit == nullptr) {
      throw Error("strategy.offload.activations: " + b.path + " is a " + b.module->name() +
                  ", not a frugal::Unit");
    }
    unit->set_wrapper(kActivationOffloadWrapperName, wrap_layer::kCheckpoint,
                      [offload, unit](const at::Tensor& x, const UnitFn& inner) {
                        return offload_saved(offload, *unit, x, inner);
                      });
    ++changed;
  }
  log::info(fmt::format("offload.activations: what {} blocks save for backward goes to host "
                        "memory (prefetch {})",
                        changed, offload->prefetch()));
  return changed;
}

}  // namespace frugal
