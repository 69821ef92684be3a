#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "frugal/io/atomic_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/util/error.h"
#include "support/io_files.h"

using frugal::io::NamedTensors;
using frugal::io::test::bit_equal;
using frugal::io::test::bytes_of;
using frugal::io::test::ScratchDir;
namespace io = frugal::io;

TEST_CASE("safetensors round-trips tensors, order and metadata", "[io][unit]") {
  ScratchDir dir;
  torch::manual_seed(2);
  NamedTensors named{
      {"blocks.0.attn.qkv.weight", torch::randn({8, 24})},
      {"blocks.0.attn.qkv.bias", torch::randn({24}).to(torch::kBFloat16)},
      {"ln.weight", torch::randn({3}).to(torch::kHalf)},
      {"tok_emb.weight", torch::randn({4, 8}).t()},  // non-contiguous
      {"step", torch::tensor(int64_t{1} << 40)},     // 0-dim
      {"ids", torch::arange(7, torch::kInt32)},
      {"mask", torch::tensor({true, false})},
      {"u8", torch::arange(9).to(torch::kUInt8)},
      {"i8", torch::arange(-4, 4).to(torch::kInt8)},
      {"i16", torch::arange(3).to(torch::kInt16)},
      {"f64", torch::randn({2}, torch::kFloat64)},
      {"u32", torch::arange(3).to(torch::kUInt32)},
      {"f8", torch::randn({5}).to(torch::kFloat8_e5m2)},
      {"c64", torch::randn({2}, torch::kComplexFloat)},
      {"none", torch::empty({0, 4})},
  };
  std::map<std::string, std::string> meta{{"format", "pt"}, {"step", "100"}};
  io::write_safetensors(dir / "m.safetensors", named, meta);
  CHECK(dir.list() == std::vector<std::string>{"m.safetensors"});

  NamedTensors loaded = io::read_safetensors(dir / "m.safetensors");
  REQUIRE(loaded.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    INFO("tensor " << named[i].first);
    CHECK(loaded[i].first == named[i].first);
    CHECK(bit_equal(loaded[i].second, named[i].second));
  }
  CHECK(io::read_safetensors_metadata(dir / "m.safetensors") == meta);
}

TEST_CASE("safetensors header layout follows the specification", "[io][unit]") {
  ScratchDir dir;
  auto w = torch::arange(6, torch::kFloat32).reshape({2, 3});
  auto b = torch::arange(3).to(torch::kBFloat16);
  io::write_safetensors(dir / "x.safetensors", {{"w", w}, {"b", b}}, {{"k", "v"}});
  std::string file = io::read_file(dir / "x.safetensors");

  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);  // LE
  CHECK(n % 8 == 0);
  REQUIRE(8 + n <= file.size());
  std::string header = file.substr(8, n);
  CHECK(header.front() == '{');
  CHECK(header.find_last_not_of(' ') + 1 >= n - 7);  // at most 7 spaces of padding

  auto json = nlohmann::json::parse(header);
  CHECK(json["__metadata__"] == nlohmann::json{{"k", "v"}});
  CHECK(json["w"] ==
        nlohmann::json{{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}});
  CHECK(json["b"] == nlohmann::json{{"dtype", "BF16"}, {"shape", {3}}, {"data_offsets", {24, 30}}});
  CHECK(file.size() == 8 + n + 30);
  CHECK(file.substr(8 + n) == bytes_of(w) + bytes_of(b));
}

TEST_CASE("safetensors writes an empty file that reads back empty", "[io][unit]") {
  ScratchDir dir;
  io::write_safetensors(dir / "e.safetensors", io::NamedTensors{});
  CHECK(io::read_safetensors(dir / "e.safetensors").empty());
  CHECK(io::read_safetensors_metadata(dir / "e.safetensors").empty());
}
