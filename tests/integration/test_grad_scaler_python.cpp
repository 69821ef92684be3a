// frugal's GradScaler against torch.amp.GradScaler from the same wheel: the same gradients,
// with inf and NaN planted in some steps, must give the same scale after every update, the
// same skipped steps and the same final parameters.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <torch/optim/sgd.h>

#include "frugal/io/safetensors.h"
#include "frugal/strategy/grad_scaler.h"
#include "support/helpers.h"

using namespace frugal;
using nlohmann::json;

TEST_CASE("GradScaler follows torch.amp.GradScaler step for step", "[integration][python][precision]") {
  test::TempDir dir("frugal-scaler");
  const int steps = 24;
  GradScalerOptions o;
  o.init_scale = 1024.0;
  o.growth_factor = 2.0;
  o.backoff_factor = 0.25;
  o.growth_interval = 3;
  const std::vector<std::string> names = {"w", "b"};
  at::manual_seed(21);
  NamedTensors initial = {{"w", at::randn({4, 3})}, {"b", at::randn({3})}};
  NamedTensors grads;
  for (int s = 0; s < steps; ++s) {
    at::Tensor gw = at::randn({4, 3}), gb = at::randn({3});
    if (s == 4 || s == 11) gw[1][2] = INFINITY;
    if (s == 12) gb[0] = NAN;
    if (s == 18) gb[2] = -INFINITY;
    grads.emplace_back("g." + std::to_string(s) + ".w", gw);
    grads.emplace_back("g." + std::to_string(s) + ".b", gb);
  }
  io::write_safetensors(dir / "initial.safetensors", initial);
  io::write_safetensors(dir / "grads.safetensors", grads);
  test::write_text(dir / "setup.json",
                   json{{"steps", steps}, {"lr", 0.1}, {"names", names},
                        {"scaler", {{"init_scale", o.init_scale}, {"growth_factor", o.growth_factor},
                                    {"backoff_factor", o.backoff_factor},
                                    {"growth_interval", o.growth_interval}}}}
                       .dump());

  std::vector<at::Tensor> params = {initial[0].second.clone().requires_grad_(true),
                                    initial[1].second.clone().requires_grad_(true)};
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1));
  GradScaler scaler(o);
  std::vector<double> scales;
  std::vector<bool> skipped;
  for (int s = 0; s < steps; ++s) {
    const double scale = scaler.get_scale();
    params[0].mutable_grad() = grads[2 * s].second * scale;
    params[1].mutable_grad() = grads[2 * s + 1].second * scale;
    scaler.unscale(params);
    skipped.push_back(!scaler.step(sgd, params));
    scaler.update();
    scales.push_back(scaler.get_scale());
  }

  auto r = test::run_command(test::python() + " " +
                             test::quote((test::source_dir() / "tests/python/grad_scaler_reference.py").string()) +
                             " " + test::quote(dir.path().string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json py = json::parse(r.out);
  CHECK(py["scales"].get<std::vector<double>>() == scales);
  CHECK(py["skipped"].get<std::vector<bool>>() == skipped);
  // The planted steps, and only they, were skipped.
  for (int s = 0; s < steps; ++s) CHECK(skipped[s] == (s == 4 || s == 11 || s == 12 || s == 18));
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<float> ref = py["params"][names[i]].get<std::vector<float>>();
    at::Tensor mine = params[i].detach().flatten();
    REQUIRE(static_cast<int64_t>(ref.size()) == mine.numel());
    for (size_t j = 0; j < ref.size(); ++j) CHECK(mine[j].item<float>() == ref[j]);
  }
}

TEST_CASE("GradScaler state round-trips and a disabled scaler passes through", "[unit][precision]") {
  GradScalerOptions o;
  o.growth_interval = 2;
  GradScaler a(o);
  at::Tensor p = at::ones({2}, at::requires_grad());
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.1));
  for (int i = 0; i < 3; ++i) {
    p.mutable_grad() = at::ones({2}) * a.get_scale();
    a.step(sgd, {p});
    a.update();
  }
  CHECK(a.get_scale() == 131072.0);  // grew once after 2 clean steps
  CHECK(a.growth_tracker() == 1);
  GradScaler b(o);
  b.load_state(a.state());
  CHECK(b.get_scale() == a.get_scale());
  CHECK(b.growth_tracker() == 1);

  GradScalerOptions off;
  off.enabled = false;
  GradScaler c(off);
  at::Tensor loss = at::ones({});
  CHECK(c.scale(loss).item<float>() == 1.0f);
  CHECK(c.get_scale() == 1.0);
}
