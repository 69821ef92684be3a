// NF4 against torchao 0.18 (tests/python/nf4_reference.py, from the same wheel): for seeded
// weights (fp32, bf16, fp16; large outliers; whole zero blocks, zeros, values exactly halfway
// between two levels; an all-zero weight) frugal's codes, scale codes, scale factors, mean and
// dequantized weight (in the weight's dtype and in fp32) equal torchao's to_nf4 bit for bit,
// and nf4::linear equals linear_nf4 (outputs and input gradients, also under CPU autocast).
// Skipped where torchao is not installed (requirements-test.txt).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "frugal/io/safetensors.h"
#include "frugal/quant/nf4.h"
#include "frugal/strategy/autocast.h"
#include "support/helpers.h"
#include "support/skip.h"

using namespace frugal;

namespace {

// Same dtype, shape and bytes (so -0.0 differs from 0.0, and NaNs compare by their bits).
bool nf4_same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
  const at::Tensor ac = a.contiguous().cpu(), bc = b.contiguous().cpu();
  return ac.nbytes() == bc.nbytes() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

}  // namespace

TEST_CASE("nf4 quantize, dequantize and linear equal torchao to_nf4 bit for bit",
          "[integration][python][nf4]") {
  test::TempDir dir("frugal-nf4");
  auto r = test::run_command(test::python() + " " +
                             test::quote((test::source_dir() / "tests/python/nf4_reference.py").string()) +
                             " " + test::quote(dir.path().string()));
  if (r.exit_code == 3) {
    test::skip("torchao is not installed (pip install -r requirements-test.txt): " + r.out);
    return;
  }
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto summary = nlohmann::json::parse(r.out);
  std::map<std::string, at::Tensor> ref;
  for (auto& [k, v] : io::read_safetensors(dir / "nf4.safetensors")) ref[k] = v;
  // The inputs exercise what they claim to.
  CHECK(summary["ties"]["bf16_zeros_ties_128x512"].get<int>() > 0);
  CHECK(summary["ties"]["f32_zeros_ties_128x512"].get<int>() > 0);
  CHECK(summary["zero_blocks"]["f32_zeros_ties_128x512"].get<int>() > 0);

  int cases = 0;
  for (const auto& name_json : summary["cases"]) {
    const std::string name = name_json.get<std::string>();
    INFO(name);
    const at::Tensor w = ref.at(name + ".input");
    const nf4::Nf4Weight q = nf4::quantize(w, name);
    CHECK(nf4_same_bits(q.codes, ref.at(name + ".codes")));
    CHECK(nf4_same_bits(q.scaler_codes, ref.at(name + ".scaler_codes")));
    CHECK(nf4_same_bits(q.scaler_factors, ref.at(name + ".factors")));
    CHECK(nf4_same_bits(q.scaler_mean, ref.at(name + ".mean")));
    CHECK(nf4_same_bits(nf4::dequantize(q, w.scalar_type()), ref.at(name + ".dequant")));
    CHECK(nf4_same_bits(nf4::dequantize(q, at::kFloat), ref.at(name + ".dequant_f32")));
    if (ref.count(name + ".x") != 0) {
      INFO("linear");
      const at::Tensor grad_y = ref.at(name + ".grad_y");
      at::Tensor x = ref.at(name + ".x").clone().requires_grad_(true);
      at::Tensor y = nf4::linear(x, q, std::nullopt);
      y.backward(grad_y);
      CHECK(nf4_same_bits(y.detach(), ref.at(name + ".y")));
      CHECK(nf4_same_bits(x.grad(), ref.at(name + ".grad_x")));
      if (ref.count(name + ".y_autocast") != 0) {
        INFO("autocast");
        at::Tensor xa = ref.at(name + ".x").clone().requires_grad_(true);
        at::Tensor ya;
        {
          AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
          ya = nf4::linear(xa, q, std::nullopt);
        }
        ya.backward(grad_y.to(ya.scalar_type()));
        CHECK(nf4_same_bits(ya.detach(), ref.at(name + ".y_autocast")));
        CHECK(nf4_same_bits(xa.grad(), ref.at(name + ".grad_x_autocast")));
      }
    }
    ++cases;
  }
  CHECK(cases == 9);
  std::cout << "nf4: " << cases << " weights bit for bit equal to torchao's\n";
}
