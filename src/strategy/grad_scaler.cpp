#include "frugal/strategy/grad_scaler.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "frugal/util/error.h"

namespace frugal {

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (options_.growth_factor <= 1.0) throw Error("grad_scaler.growth_factor must be > 1");
  if (options_.backoff_factor <= 0.0 || options_.backoff_factor >= 1.0) {
    throw Error("grad_scaler.backoff_factor must be in (0, 1)");
  }
  if (options_.growth_interval < 1) throw Error("grad_scaler.growth_interval must be >= 1");
  if (options_.init_scale <= 0.0) throw Error("grad_scaler.init_scale must be > 0");
}

void GradScaler::lazy_init(const at::Device& device) {
  if (scale_.defined()) {
    if (scale_.device() != device) {
      scale_ = scale_.to(device);
      growth_tracker_ = growth_tracker_.to(device);
    }
    return;
  }
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::full({1}, options_.init_scale, f32);
  growth_tracker_ = at::zeros({1}, f32.dtype(at::kInt));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!options_.enabled) return loss;
  lazy_init(loss.device());
  return loss * scale_.to(loss.scalar_type());
}

bool GradScaler::unscale(const std::vector<at::Tensor>& params) {
  if (!options_.enabled) return false;
  if (unscaled_) throw std::logic_error("GradScaler::unscale called twice in one step");
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  }
  if (grads.empty()) {
    found_inf_ = at::zeros({1}, at::kFloat);
    unscaled_ = true;
    return false;
  }
  lazy_init(grads.front().device());
  // Like PyTorch: the reciprocal is taken in double, then rounded to float.
  at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  found_inf_ = at::zeros({1}, scale_.options());
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  unscaled_ = true;
  return found_inf_.item<float>() != 0.0f;
}

void GradScaler::set_found_inf(bool found_inf) {
  if (!options_.enabled || !unscaled_) return;
  found_inf_.fill_(found_inf ? 1.0 : 0.0);
}

bool GradScaler::step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  const bool found_inf = unscaled_ ? found_inf_.item<float>() != 0.0f : unscale(params);
  if (found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  if (!scale_.defined()) return;  // nothing was scaled yet
  at::Tensor found = found_inf_.defined() ? found_inf_.to(scale_.device())
                                          : at::zeros({1}, scale_.options());
  at::_amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  found_inf_ = at::Tensor();
  unscaled_ = false;
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<float>() : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int>() : 0;
}

NamedTensors GradScaler::state() const {
  return {{"grad_scaler.scale", at::full({1}, get_scale(), at::kFloat)},
          {"grad_scaler.growth_tracker", at::full({1}, growth_tracker(), at::kInt)}};
}

void GradScaler::load_state(const NamedTensors& state) {
  for (const auto& [name, t] : state) {
    if (name == "grad_scaler.scale") {
      lazy_init(scale_.defined() ? scale_.device() : at::Device(at::kCPU));
      scale_.copy_(t.to(at::kFloat));
    } else if (name == "grad_scaler.growth_tracker") {
      lazy_init(scale_.defined() ? scale_.device() : at::Device(at::kCPU));
      growth_tracker_.copy_(t.to(at::kInt));
    }
  }
}

}  // namespace frugal
