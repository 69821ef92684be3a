// Precision strategies (strategy.precision):
//   fp32        no autocast, no scaling
//   bf16-mixed  forward under autocast to bfloat16; fp32 weights, gradients and optimizer
//   fp16-mixed  forward under autocast to float16, with dynamic loss scaling (GradScaler) so
//               small gradients survive float16's range; a step whose gradients overflowed
//               is skipped and the scale backs off
// The engine asks it for an autocast scope per micro-batch, to scale the loss before
// backward, to unscale once before clipping, and whether to step.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/io/checkpoint.h"
#include "frugal/strategy/autocast.h"
#include "frugal/strategy/grad_scaler.h"

namespace frugal {

// What a precision does: autocast (to `dtype`) or not, dynamic loss scaling or not.
struct PrecisionSpec {
  bool autocast = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool loss_scaling = false;  // a GradScaler, configured by strategy.grad_scaler
};

// Makes `name` a valid strategy.precision (in YAML and for Precision's constructor), e.g.
// register_precision("fp16-mixed-unscaled", {true, at::kHalf, false}). A name already taken
// (built in or registered) is a frugal::Error.
void register_precision(const std::string& name, const PrecisionSpec& spec);
// What `name` does (built in or registered), for code that asks about a precision without
// running it (the planner, the out-of-memory advice); an unknown name is a frugal::Error
// listing the known ones.
PrecisionSpec precision_spec(const std::string& name);
// None for a name that is no precision (`auto` included: it is resolved to one first).
std::optional<PrecisionSpec> find_precision_spec(const std::string& name);

// The precision to run on `device`: `precision` itself, or what `auto` means there (the one
// place it is decided): bf16-mixed on GPUs of compute capability >= 8.0 and on CPUs with bf16
// instructions (AVX512-BF16 or AMX), fp16-mixed (with its GradScaler) on older GPUs, fp32
// otherwise. The trainer resolves it before the run (logged, and written into
// config.resolved.yaml); the Engine at setup() for C++ callers; the memory tools for their
// traces.
std::string resolve_precision(const std::string& precision, const c10::Device& device);

class Precision {
 public:
  explicit Precision(const std::string& name, const GradScalerConfig& scaler = {});

  const std::string& name() const { return name_; }
  bool autocast_enabled() const { return autocast_; }
  c10::ScalarType autocast_dtype() const { return dtype_; }

  // The forward's scope: autocast on `device` when this precision uses it.
  std::unique_ptr<AutocastGuard> autocast(c10::DeviceType device) const;
  // loss * scale with fp16-mixed; the loss itself otherwise.
  at::Tensor scale_loss(const at::Tensor& loss);
  // Divides gradients by the scale (fp16-mixed); true when any is inf/NaN.
  bool unscale(const std::vector<at::Tensor>& params);
  // Overrides this step's overflow verdict (sharded ranks agree on one; fp16-mixed only).
  void set_found_inf(bool found_inf);
  // After the optimizer step (or its skip): grows or backs off the scale.
  void update();
  double loss_scale() const;

  NamedTensors state() const;
  void load_state(const NamedTensors& state);

  GradScaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }

 private:
  std::string name_;
  bool autocast_ = false;
  c10::ScalarType dtype_ = c10::ScalarType::Float;
  std::optional<GradScaler> scaler_;
};

}  // namespace frugal
