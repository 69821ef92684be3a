#include "frugal/strategy/precision.h"

#include "frugal/config/named_registry.h"
#include "frugal/util/error.h"

namespace frugal {

namespace {

NamedRegistry<PrecisionSpec>& precisions() {
  static NamedRegistry<PrecisionSpec> r(
      "strategy.precision", "precision",
      {
          {"fp32", {false, c10::ScalarType::Float, false}},
          {"bf16-mixed", {true, c10::ScalarType::BFloat16, false}},
          {"fp16-mixed", {true, c10::ScalarType::Half, true}},
      },
      /*validated=*/true);
  return r;
}

// Built when the library loads, so that config validation knows the built-in names before
// anything asked for this registry.
[[maybe_unused]] const bool kPrecisionNamesAtLoad = (precisions(), true);

}  // namespace

void register_precision(const std::string& name, const PrecisionSpec& spec) {
  precisions().add(name, spec);
}

PrecisionSpec precision_spec(const std::string& name) { return precisions().get(name); }

std::optional<PrecisionSpec> find_precision_spec(const std::string& name) {
  return precisions().find(name);
}

Precision::Precision(const std::string& name, const GradScalerConfig& sc) : name_(name) {
  const PrecisionSpec spec = precision_spec(name);
  autocast_ = spec.autocast;
  dtype_ = spec.dtype;
  if (spec.loss_scaling) scaler_.emplace(sc);
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

void Precision::set_found_inf(bool found_inf) {
  if (scaler_) scaler_->set_found_inf(found_inf);
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
