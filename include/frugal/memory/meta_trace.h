// One training micro-step traced on the meta device: the model is built there (no memory, no
// initialisation arithmetic), a micro-batch of the right shapes runs forward and backward
// through the strategies that change activation memory (checkpointing, activation offload,
// the chunked loss), and a counting allocator behind every meta tensor records the bytes
// alive at each moment. No arithmetic happens, so an 8B model's step takes seconds on any CPU:
// what `frugal plan` and `strategy.checkpointing.policy: auto` predict from.
//
// Autocast does not run on meta tensors: a mixed precision is traced with the model cast to
// its compute dtype, plus what autocast keeps besides, the cast copies of the linear layers'
// weights (cached until the forward ends).
#pragma once

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdint>
#include <optional>
#include <string>

#include "frugal/config/config.h"

namespace frugal::memory {

// While alive, tensors this thread creates without naming a device (a model's parameters and
// buffers in its constructor) are meta tensors: the factories skip BackendSelect, which would
// send them to the CPU their options name, and run their meta kernels. The thread's dispatch
// keys are restored exactly when it goes (c10's IncludeDispatchKeyGuard would leave Meta's
// backend bit behind: a key set's subtraction keeps backend bits, and every CPU operation
// after it would run on meta).
class OnMetaDevice {
 public:
  OnMetaDevice();
  ~OnMetaDevice();
  OnMetaDevice(const OnMetaDevice&) = delete;
  OnMetaDevice& operator=(const OnMetaDevice&) = delete;

 private:
  c10::impl::LocalDispatchKeySet saved_;
};

struct TraceSettings {
  std::string precision = "fp32";  // strategy.precision (not auto)
  CheckpointingConfig checkpointing;  // policy none / full / every_k / selective
  bool offload_activations = false;
  int64_t activation_prefetch = 1;
  int64_t loss_chunk_tokens = 0;
  int64_t micro_batch = 1;
};

struct TraceResult {
  // Peak of everything but the parameters and their gradients, bytes: activations, the
  // loss's logits, temporaries, and autocast's weight copies.
  int64_t activation_peak = 0;
  // The same with each gradient dropped once accumulated: the activations' own peak (plus the
  // largest gradients in flight), for runs whose gradients are sharded or stepped in backward.
  int64_t activation_peak_alone = 0;
};

// The trace of one micro-step of cfg's model (cfg.model, the shapes of cfg.data's batches).
// A model whose operators have no meta kernel returns nullopt with the reason in `why_not`.
std::optional<TraceResult> trace_step(const Config& cfg, const TraceSettings& s,
                                      std::string* why_not = nullptr);

}  // namespace frugal::memory
