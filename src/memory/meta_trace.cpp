#include "frugal/memory/meta_trace.h"

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "frugal/data/batch.h"
#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/models/finetune.h"
#include "frugal/models/model.h"
#include "frugal/models/registry.h"
#include "frugal/strategy/activation_offload.h"
#include "frugal/strategy/autocast.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/gradient_hooks.h"
#include "frugal/strategy/precision.h"
#include "frugal/util/error.h"
#include "meta_kernels.h"

namespace frugal::memory {
namespace {

// Stands in for ATen's meta allocator (which hands out null pointers and counts nothing):
// the same null pointers, with each allocation's size kept in the DataPtr's context so that
// its free is counted too. Installed once, for the whole process, at priority 1 over ATen's
// own; outside a trace it only keeps the counters, which nothing reads.
class CountingMetaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const int64_t now = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {nullptr, new size_t(n), &release, c10::Device(c10::kMeta)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {}

  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

 private:
  static void release(void* ctx);
  static std::atomic<int64_t> live_, peak_;
};

std::atomic<int64_t> CountingMetaAllocator::live_{0};
std::atomic<int64_t> CountingMetaAllocator::peak_{0};

void CountingMetaAllocator::release(void* ctx) {
  auto* n = static_cast<size_t*>(ctx);
  live_.fetch_sub(static_cast<int64_t>(*n));
  delete n;
}

CountingMetaAllocator& counter() {
  static CountingMetaAllocator* instance = [] {
    auto* a = new CountingMetaAllocator();  // lives as long as the process: tensors may outlive any scope
    c10::SetAllocator(c10::kMeta, a, /*priority=*/1);
    return a;
  }();
  return *instance;
}

// Every tensor of `b` as a meta tensor of the same shape and dtype.
Batch on_meta(const Batch& b) {
  auto meta = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    return at::empty(t.sizes(), t.options().device(at::kMeta));
  };
  Batch m;
  m.x = meta(b.x);
  m.y = meta(b.y);
  m.attention_mask = meta(b.attention_mask);
  m.position_ids = meta(b.position_ids);
  return m;
}

// One batch of the config's data, with `micro_batch` rows (its shapes and dtypes are what
// the trace needs; the values are never read).
Batch sample_batch(const Config& cfg, int64_t micro_batch) {
  auto data = make_dataset(cfg.data, cfg.model, Split::train, cfg.run.seed);
  LoaderOptions lo;
  lo.batch_size = micro_batch;
  lo.num_workers = 0;
  DataLoader loader(data, lo);
  return loader.next();
}

}  // namespace

OnMetaDevice::OnMetaDevice() : saved_(c10::impl::tls_local_dispatch_key_set()) {
  register_meta_kernels();
  c10::impl::PODLocalDispatchKeySet keys;
  keys.set_included(saved_.included_ | c10::DispatchKeySet(c10::DispatchKey::Meta));
  keys.set_excluded(saved_.excluded_ | c10::DispatchKeySet(c10::DispatchKey::BackendSelect));
  c10::impl::_force_tls_local_dispatch_key_set(c10::impl::LocalDispatchKeySet(keys));
}

OnMetaDevice::~OnMetaDevice() { c10::impl::_force_tls_local_dispatch_key_set(saved_); }

std::optional<TraceResult> trace_step(const Config& cfg, const TraceSettings& s,
                                      std::string* why_not) {
  CountingMetaAllocator& count = counter();
  static std::mutex one_trace_at_a_time;  // the counters are global
  std::lock_guard<std::mutex> lock(one_trace_at_a_time);
  try {
    const Batch batch = sample_batch(cfg, s.micro_batch);
    // Factories called without a device (parameters, buffers, tables made in constructors)
    // land on the meta device too while this is on: nothing is allocated or initialised.
    OnMetaDevice on_meta_device;
    const int64_t base = count.live();
    ModelConfig mc = cfg.model;
    mc.loss_chunk_tokens = s.loss_chunk_tokens;
    std::shared_ptr<Model> model = make_model(mc);
    apply_finetuning(*model, mc);  // adapters, NF4 weights, frozen parameters: the run's
    const PrecisionSpec spec = precision_spec(s.precision);
    const at::ScalarType dtype = spec.autocast ? spec.dtype : at::kFloat;
    // ...and the frozen linear weights stored as the trainer stores them.
    if (spec.autocast && frozen_weights_follow_autocast(mc)) {
      store_frozen_linear_weights(*model, dtype);
    }
    TraceResult r;
    // The gradients' bytes: trained parameters only (frozen ones and NF4 weights get none).
    int64_t param_bytes = 0;
    for (const auto& p : model->parameters()) {
      if (p.requires_grad()) param_bytes += static_cast<int64_t>(p.nbytes());
    }
    // Autocast's cached low-precision copies of the trained linear weights (autocast caches
    // trained leaves alone). The trace casts each use instead, which its matmul saves for
    // backward as the run's does; what it does not see is the cache keeping every one alive
    // to the end of the forward, which matters under checkpointing (below).
    int64_t cached_copies = 0;
    if (spec.autocast) {
      for (const auto& item : model->named_modules()) {
        auto* linear = item.value()->as<torch::nn::Linear>();
        // An NF4 layer has no weight tensor: it dequantizes inside its forward instead.
        if (linear == nullptr || !linear->weight.defined()) continue;
        if (linear->weight.requires_grad()) {
          cached_copies += linear->weight.numel() * static_cast<int64_t>(c10::elementSize(dtype));
        }
      }
    }
    if (checkpointing_enabled(s.checkpointing)) {
      apply_checkpointing(*model, s.checkpointing, model->block_lists());
    }
    std::shared_ptr<ActivationOffload> offload;
    if (s.offload_activations) {
      offload = std::make_shared<ActivationOffload>(s.activation_prefetch, /*pin_memory=*/false);
      apply_activation_offload(*model, offload, model->block_lists());
    }
    const Batch mb = on_meta(batch);
    const int64_t before = count.live() - base;  // the parameters
    const std::vector<at::Tensor> params = model->parameters();
    // Two passes: gradients kept as a plain backward keeps them, and gradients dropped as soon
    // as each is accumulated (what sharded gradients and optim.in_backward come close to):
    // with every gradient alive at the end, the first pass's peak can be the gradients', and
    // hide the activations' peak earlier in backward.
    for (bool keep_grads : {true, false}) {
      for (const auto& p : params) p.mutable_grad().reset();
      std::optional<GradientHooks> drop;
      if (!keep_grads) {
        drop.emplace(params, [&params](size_t i) { params[i].mutable_grad().reset(); });
      }
      count.reset_peak();
      int64_t forward_peak = 0;
      {
        // Autocast runs the loss in fp32 (cross entropy is on its fp32 list): the low-precision
        // logits go through the same cast. The chunked loss does its own
        // (models/chunked_loss.h).
        at::Tensor loss;
        {
          // The run's autocast around the forward, as the engine's, standing as the CPU's:
          // frugal's matmul-like calls cast their meta inputs under it as ATen's autocast
          // casts real ones (util/autocast_dtype.h), so the fp32 parameters and residual
          // stream stay fp32 beside their low-precision copies, as in the run. A checkpointed
          // unit's replay in backward restores it.
          AutocastGuard autocast(c10::DeviceType::CPU, dtype, spec.autocast);
          loss = spec.autocast && s.loss_chunk_tokens == 0
                     ? model->loss_sum(model->forward_batch(mb).to(at::kFloat), mb.y)
                     : model->batch_loss_sum(mb);
        }
        forward_peak = count.peak() - base - before;
        loss.backward();
      }
      const int64_t above_params = count.peak() - base - before;
      // Autocast's cached low-precision weight copies: without checkpointing, autograd saves
      // them for backward, so they stand on backward's peak too. Under checkpointing nothing
      // saves them: they live through the forward only (the engine leaves its autocast region,
      // which drops them, before backward, and a recomputed unit drops its own when its replay
      // ends), on the forward's peak, when no gradient exists yet (measured on SmolLM2-135M,
      // T 256, bf16-mixed + full checkpointing: 109 MiB, where adding them to backward's peak
      // predicted 314 MiB).
      const int64_t forward_with_copies = forward_peak + cached_copies;
      if (!checkpointing_enabled(s.checkpointing)) {
        if (keep_grads) {
          r.activation_peak = std::max<int64_t>(0, above_params - param_bytes);
        } else {
          r.activation_peak_alone = std::max<int64_t>(0, above_params);
        }
      } else if (keep_grads) {
        // Every parameter's gradient exists at the end of backward; the forward's peak has
        // none of them (predict_peak adds the gradients to this figure).
        r.activation_peak = std::max<int64_t>(
            {int64_t{0}, above_params - param_bytes, forward_with_copies - param_bytes});
      } else {
        r.activation_peak_alone = std::max<int64_t>({int64_t{0}, above_params, forward_with_copies});
      }
    }
    return r;
  } catch (const c10::Error& e) {
    if (why_not != nullptr) {
      const std::string what = e.what_without_backtrace();
      *why_not = first_line(what);
    }
    return std::nullopt;
  }
}

}  // namespace frugal::memory
