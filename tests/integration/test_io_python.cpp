// The files frugal writes for Python, read by Python: the venv's torch.load (default
// weights_only=True) and safetensors.torch.load_file must see exactly the tensors C++ wrote.
#include <fmt/format.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "frugal/io/atomic_file.h"
#include "frugal/io/pt_export.h"
#include "frugal/io/safetensors.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/io_files.h"

using frugal::io::NamedTensors;
using frugal::io::test::bytes_of;
using frugal::io::test::ScratchDir;
namespace io = frugal::io;

namespace {

// torch's Python name for a dtype (the attribute of the torch module).
std::string python_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      FAIL("no Python name for " << c10::toString(t));
      return "";
  }
}

std::string to_hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

// What the files must hold, written from the source tensors (not from any file).
std::string expected_json(const NamedTensors& named) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, t] : named) {
    list.push_back({{"name", name},
                    {"dtype", python_dtype(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"hex", to_hex(bytes_of(t))}});
  }
  return list.dump(1);
}

int run(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("Python reads the .pt, safetensors and checkpoint files C++ writes", "[io][python]") {
  ScratchDir dir;
  float nan_bits = 0;
  uint32_t payload = 0x7fc0beef;  // a NaN with a payload: survives only a byte-exact path
  std::memcpy(&nan_bits, &payload, 4);
  // Deliberately unsorted names, every common dtype, a non-contiguous and a 0-dim tensor.
  NamedTensors named{
      {"blocks.0.attn.qkv.weight", torch::arange(24, torch::kFloat32).reshape({4, 6}) * 0.25 - 1},
      {"blocks.0.attn.qkv.bias", (torch::arange(6, torch::kFloat32) / 3).to(torch::kBFloat16)},
      {"blocks.1.mlp.fc.weight",
       (torch::arange(12, torch::kFloat32) / 7).reshape({3, 4}).to(torch::kHalf).t()},
      {"tok_emb.weight", torch::arange(10, torch::kFloat64).reshape({5, 2}) / 9},
      {"special", torch::tensor({0.0f, -0.0f, INFINITY, -INFINITY, nan_bits, 1e-45f})},
      {"step", torch::tensor(int64_t{1} << 40)},
      {"ids", torch::arange(-3, 4, torch::kInt32)},
      {"i16", torch::arange(-2, 2).to(torch::kInt16)},
      {"i8", torch::arange(-128, 128, 51).to(torch::kInt8)},
      {"u8", torch::arange(0, 256, 37).to(torch::kUInt8)},
      {"mask", torch::tensor({true, false, true})},
      {"alpha", torch::zeros({0, 3})},
  };
  io::write_pt(dir / "model.pt", named);
  io::write_safetensors(dir / "model.safetensors", named, {{"format", "pt"}});
  io::write_file_atomic(dir / "ckpt.bin", io::save_tensors(named));
  io::write_file_atomic(dir / "expected.json", expected_json(named));

  const std::string script = (frugal::test::source_dir() / "tests/python/check_export.py").string();
  auto command = [&](const std::string& expected) {
    return fmt::format("'{}' '{}' '{}' '{}' '{}' '{}' > '{}' 2>&1", frugal::test::python(), script,
                       (dir / "model.pt").string(), (dir / "model.safetensors").string(),
                       (dir / expected).string(), (dir / "ckpt.bin").string(),
                       (dir / "out.txt").string());
  };
  // A Python without torch or safetensors fails here, on purpose: this test never skips.
  int rc = run(command("expected.json"));
  std::string out = io::read_file(dir / "out.txt");
  INFO("check_export.py said:\n" << out);
  CHECK(rc == 0);
  CHECK(out.find("OK") != std::string::npos);

  // The control: one expected bit changed must make the same check fail.
  std::string wrong = expected_json(named);
  size_t at = wrong.find("\"hex\": \"") + 8;
  wrong[at] = wrong[at] == '0' ? '1' : '0';
  io::write_file_atomic(dir / "wrong.json", wrong);
  int wrong_rc = run(command("wrong.json"));
  std::string wrong_out = io::read_file(dir / "out.txt");
  INFO("with a wrong expectation check_export.py said:\n" << wrong_out);
  CHECK(wrong_rc == 1);
  CHECK(wrong_out.find("values differ") != std::string::npos);
}

TEST_CASE("load_tensors reads a dict of tensors saved by Python's torch.save", "[io][python]") {
  ScratchDir dir;
  const std::string script =
      (frugal::test::source_dir() / "tests/python/write_state_dict.py").string();
  std::string command = fmt::format("'{}' '{}' '{}' '{}' > '{}' 2>&1", frugal::test::python(),
                                    script, (dir / "plain.pt").string(),
                                    (dir / "ordered.pt").string(), (dir / "out.txt").string());
  int rc = run(command);
  INFO("write_state_dict.py said:\n" << io::read_file(dir / "out.txt"));
  REQUIRE(rc == 0);

  NamedTensors loaded = io::load_tensors(io::read_file(dir / "plain.pt"), "plain.pt");
  // nn.Sequential(Linear(3, 4), LayerNorm(4)), parameter i = arange(numel) + 100 * i.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected{
      {"0.weight", {4, 3}}, {"0.bias", {4}}, {"1.weight", {4}}, {"1.bias", {4}}};
  REQUIRE(loaded.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, shape] = expected[i];
    INFO(name);
    CHECK(loaded[i].first == name);
    auto want = torch::arange(c10::multiply_integers(shape), torch::kFloat32).reshape(shape) +
                100.0 * static_cast<double>(i);
    CHECK(frugal::io::test::bit_equal(loaded[i].second, want));
  }

  // A state_dict as it is (OrderedDict + _metadata): torch's C++ unpickler can't rebuild it;
  // that must be an error, not a crash (docs/formats.md says to save dict(state_dict)).
  CHECK_THROWS_AS(io::load_tensors(io::read_file(dir / "ordered.pt"), "ordered.pt"), frugal::Error);
}
