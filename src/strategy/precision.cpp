#include "frugal/strategy/precision.h"

#include <map>
#include <mutex>

#include "frugal/config/strategy_names.h"
#include "frugal/util/error.h"

namespace frugal {

namespace {

std::mutex& specs_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PrecisionSpec>& specs() {
  static std::map<std::string, PrecisionSpec> s = {
      {"fp32", {false, c10::ScalarType::Float, false}},
      {"bf16-mixed", {true, c10::ScalarType::BFloat16, false}},
      {"fp16-mixed", {true, c10::ScalarType::Half, true}},
  };
  return s;
}

}  // namespace

void register_precision(const std::string& name, const PrecisionSpec& spec) {
  if (name.empty()) throw Error("register_precision: empty name");
  {
    std::lock_guard<std::mutex> lock(specs_mutex());
    if (!specs().emplace(name, spec).second) {
      throw Error("register_precision: '" + name + "' is already a precision");
    }
  }
  register_strategy_name("strategy.precision", name);
}

Precision::Precision(const std::string& name, const GradScalerConfig& sc) : name_(name) {
  PrecisionSpec spec;
  {
    std::lock_guard<std::mutex> lock(specs_mutex());
    auto it = specs().find(name);
    if (it == specs().end()) {
      std::string known;
      for (const auto& [n, _] : specs()) known += (known.empty() ? "" : ", ") + n;
      throw Error("strategy.precision: unknown precision '" + name + "' (known: " + known + ")");
    }
    spec = it->second;
  }
  autocast_ = spec.autocast;
  dtype_ = spec.dtype;
  if (spec.loss_scaling) {
    GradScalerOptions o;
    o.enabled = sc.enabled;
    o.init_scale = sc.init_scale;
    o.growth_factor = sc.growth_factor;
    o.backoff_factor = sc.backoff_factor;
    o.growth_interval = sc.growth_interval;
    scaler_.emplace(o);
  }
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
