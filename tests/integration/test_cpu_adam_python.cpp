// frugal's fused CPU Adam / AdamW against torch.optim.Adam / AdamW from the same wheel: 5 steps
// over 100003 elements (a tail that no vector width divides), with weight decay, fp32: the
// parameters and both moments agree within 1e-6 relative (to the largest magnitude of each).
// bf16 parameters: within bf16's rounding of the fp32 result.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "frugal/io/safetensors.h"
#include "frugal/optim/cpu_adam.h"
#include "support/helpers.h"

using namespace frugal;

namespace {

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b).abs().max().item<double>() / b.abs().max().item<double>();
}

}  // namespace

TEST_CASE("the fused CPU Adam and AdamW equal torch.optim's", "[integration][python][optim]") {
  for (bool decoupled : {true, false}) {
    SECTION(decoupled ? "AdamW" : "Adam") {
      test::TempDir dir("frugal-cpu-adam");
      const int steps = 5;
      const int64_t n = 100003;
      AdamHyper h;
      h.lr = 2e-3;
      h.beta1 = 0.85;
      h.beta2 = 0.99;
      h.eps = 1e-7;
      h.weight_decay = 0.05;
      h.decoupled = decoupled;
      at::manual_seed(11);
      io::NamedTensors inputs = {{"p", at::randn({n})}};
      for (int s = 0; s < steps; ++s) inputs.emplace_back("g." + std::to_string(s), at::randn({n}) * 0.1);
      io::write_safetensors(dir / "inputs.safetensors", inputs);
      test::write_text(dir / "setup.json",
                       nlohmann::json{{"steps", steps}, {"lr", h.lr}, {"betas", {h.beta1, h.beta2}},
                                      {"eps", h.eps}, {"weight_decay", h.weight_decay},
                                      {"decoupled", decoupled}}
                           .dump());
      at::Tensor p = inputs[0].second.clone(), m = at::zeros({n}), v = at::zeros({n});
      at::Tensor pb = inputs[0].second.to(at::kBFloat16), mb = at::zeros({n}), vb = at::zeros({n});
      for (int s = 0; s < steps; ++s) {
        cpu_adam_step(p, inputs[s + 1].second, m, v, h, s + 1);
        cpu_adam_step(pb, inputs[s + 1].second, mb, vb, h, s + 1);  // bf16 params, fp32 grads
      }
      auto r = test::run_command(
          test::python() + " " +
          test::quote((test::source_dir() / "tests/python/cpu_adam_reference.py").string()) + " " +
          test::quote(dir.path().string()));
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      std::map<std::string, at::Tensor> ref;
      for (auto& [k, t] : io::read_safetensors(dir / "reference.safetensors")) ref[k] = t;
      CHECK(rel_diff(p, ref.at("p")) < 1e-6);
      CHECK(rel_diff(m, ref.at("exp_avg")) < 1e-6);
      CHECK(rel_diff(v, ref.at("exp_avg_sq")) < 1e-6);
      // bf16 parameters: each step rounds to bf16 (8 bits of mantissa), nothing worse.
      CHECK(rel_diff(pb, ref.at("p")) < steps * 1.0 / 256);
    }
  }
}

TEST_CASE("the fused CPU Adam refuses tensors it cannot step", "[unit][optim]") {
  AdamHyper h;
  at::Tensor p = at::zeros({8}), g = at::zeros({8}), m = at::zeros({8}), v = at::zeros({8});
  at::Tensor short_m = at::zeros({7}), half_m = at::zeros({8}, at::kHalf);
  CHECK_THROWS_WITH(cpu_adam_step(p, g, short_m, v, h, 1), Catch::Contains("same size"));
  CHECK_THROWS_WITH(cpu_adam_step(p, g, half_m, v, h, 1), Catch::Contains("float32"));
  CHECK_THROWS_WITH(cpu_adam_step(p, g, m, v, h, 0), Catch::Contains("step counts from 1"));
}
