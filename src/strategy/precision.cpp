#include "frugal/strategy/precision.h"

#include "frugal/util/error.h"

namespace frugal {

Precision::Precision(const std::string& name, const GradScalerConfig& sc) : name_(name) {
  if (name == "fp32") return;
  if (name == "bf16-mixed") {
    autocast_ = true;
    dtype_ = c10::ScalarType::BFloat16;
    return;
  }
  if (name == "fp16-mixed") {
    autocast_ = true;
    dtype_ = c10::ScalarType::Half;
    GradScalerOptions o;
    o.enabled = sc.enabled;
    o.init_scale = sc.init_scale;
    o.growth_factor = sc.growth_factor;
    o.backoff_factor = sc.backoff_factor;
    o.growth_interval = sc.growth_interval;
    scaler_.emplace(o);
    return;
  }
  throw Error("strategy.precision: unknown precision '" + name +
              "' (expected fp32, bf16-mixed or fp16-mixed)");
}

std::unique_ptr<AutocastGuard> Precision::autocast(c10::DeviceType device) const {
  return std::make_unique<AutocastGuard>(device, dtype_, autocast_);
}

at::Tensor Precision::scale_loss(const at::Tensor& loss) {
  return scaler_ ? scaler_->scale(loss) : loss;
}

bool Precision::unscale(const std::vector<at::Tensor>& params) {
  return scaler_ ? scaler_->unscale(params) : false;
}

void Precision::update() {
  if (scaler_) scaler_->update();
}

double Precision::loss_scale() const { return scaler_ ? scaler_->get_scale() : 1.0; }

NamedTensors Precision::state() const { return scaler_ ? scaler_->state() : NamedTensors{}; }

void Precision::load_state(const NamedTensors& state) {
  if (scaler_) scaler_->load_state(state);
}

}  // namespace frugal
