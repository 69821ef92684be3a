#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <limits>

#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "support/io_files.h"

using frugal::io::NamedTensors;
using frugal::io::test::bit_equal;
namespace io = frugal::io;

namespace {

void check_round_trip(const NamedTensors& named) {
  NamedTensors loaded = io::load_tensors(io::save_tensors(named), "test");
  REQUIRE(loaded.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    INFO("tensor " << named[i].first);
    CHECK(loaded[i].first == named[i].first);
    CHECK(bit_equal(loaded[i].second, named[i].second));
    CHECK(loaded[i].second.device().is_cpu());
    CHECK(loaded[i].second.is_contiguous());
    CHECK_FALSE(loaded[i].second.requires_grad());
  }
}

}  // namespace

TEST_CASE("tensor_io round-trips float32 bit for bit, special values included", "[io][unit]") {
  torch::manual_seed(0);
  float inf = std::numeric_limits<float>::infinity();
  auto special = torch::tensor({0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::denorm_min(), 1e-38f, 3.4e38f});
  // A NaN with a payload: only a byte copy keeps it.
  special.view(torch::kInt32)[4] = 0x7fc12345;
  check_round_trip({{"special", special},
                    {"blocks.0.attn.qkv.weight", torch::randn({16, 48})},
                    {"param", torch::randn({3, 3}, torch::requires_grad())}});
}

TEST_CASE("tensor_io round-trips bfloat16, int64 and other dtypes", "[io][unit]") {
  torch::manual_seed(1);
  NamedTensors named{
      {"bf16", torch::randn({5, 7}).to(torch::kBFloat16)},
      {"fp16", torch::randn({4}).to(torch::kHalf)},
      {"fp64", torch::randn({2, 2}, torch::kFloat64)},
      {"i64", torch::tensor({std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                             std::numeric_limits<int64_t>::max()})},
      {"i32", torch::arange(10, torch::kInt32)},
      {"u8", torch::arange(256).to(torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"u16", torch::arange(5).to(torch::kUInt16)},
      {"f8", torch::randn({6}).to(torch::kFloat8_e4m3fn)},
      {"c64", torch::randn({3}, torch::kComplexFloat)},
      {"scalar", torch::tensor(42.5)},
      {"empty", torch::empty({0, 3})},
  };
  check_round_trip(named);
}

TEST_CASE("tensor_io saves non-contiguous tensors and views as their values", "[io][unit]") {
  auto base = torch::arange(1000, torch::kFloat32).reshape({10, 100});
  NamedTensors named{{"transposed", base.t()},
                     {"strided", base.slice(1, 3, 90, 7)},
                     {"offset_view", base[7]},
                     {"expanded", torch::arange(3.0).expand({4, 3})},
                     {"conj", torch::randn({3}, torch::kComplexFloat).conj()}};
  check_round_trip(named);
  // A one-row view must not drag its 1000-element base storage into the file.
  std::string small = io::save_tensors({{"row", base[7].slice(0, 0, 2)}});
  CHECK(small.size() < io::save_tensors({{"all", base}}).size() - 3000);
}

TEST_CASE("tensor_io keeps the given order, not a sorted one", "[io][unit]") {
  NamedTensors named;
  for (const char* name : {"zeta", "alpha", "blocks.10.mlp.weight", "blocks.2.mlp.weight", "b"}) {
    named.emplace_back(name, torch::ones({2}));
  }
  NamedTensors loaded = io::load_tensors(io::save_tensors(named), "test");
  REQUIRE(loaded.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) CHECK(loaded[i].first == named[i].first);
}

TEST_CASE("save_tensors rejects what it cannot save faithfully", "[io][unit]") {
  CHECK_THROWS_WITH(io::save_tensors({{"w", torch::ones({1})}, {"w", torch::ones({1})}}),
                    Catch::Contains("'w' appears twice"));
  CHECK_THROWS_WITH(io::save_tensors({{"u", at::Tensor()}}), Catch::Contains("'u'"));
  CHECK_THROWS_AS(io::save_tensors({{"", torch::ones({1})}}), frugal::Error);
  CHECK_THROWS_AS(io::save_tensors({{"s", torch::ones({2, 2}).to_sparse()}}), frugal::Error);
  CHECK(io::load_tensors(io::save_tensors({}), "empty").empty());
}
