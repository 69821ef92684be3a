// Damaged and hostile inputs to the io readers: each must end in one frugal::Error that names
// the input, never a crash and never silently wrong tensors.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "frugal/io/atomic_file.h"
#include "frugal/io/pt_export.h"
#include "frugal/io/safetensors.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "support/io_files.h"

using frugal::io::NamedTensors;
using frugal::io::test::bit_equal;
using frugal::io::test::ScratchDir;
namespace io = frugal::io;

namespace {

const std::string kCorrupt = "ckpt/model.bin: corrupt or truncated tensor data (";

NamedTensors sample() {
  return {{"blocks.0.attn.qkv.weight", torch::arange(12, torch::kFloat32).reshape({3, 4})},
          {"step", torch::tensor(int64_t{7})},
          {"ln.bias", torch::arange(5).to(torch::kBFloat16)}};
}

// What load_tensors makes of `bytes`: "same" (the original tensors), or the error message.
std::string outcome(const std::string& bytes, const NamedTensors& original) {
  try {
    NamedTensors loaded = io::load_tensors(bytes, "ckpt/model.bin");
    if (loaded.size() != original.size()) return "DIFFERENT";
    for (size_t i = 0; i < loaded.size(); ++i) {
      if (loaded[i].first != original[i].first || !bit_equal(loaded[i].second, original[i].second))
        return "DIFFERENT";
    }
    return "same";
  } catch (const frugal::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("OTHER EXCEPTION: ") + e.what();
  }
}

// A safetensors file from a header text and a data section, for hand-made damage.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

}  // namespace

TEST_CASE("load_tensors rejects truncated data", "[io][bad_input]") {
  NamedTensors original = sample();
  std::string bytes = io::save_tensors(original);
  for (size_t n : {size_t{0}, size_t{1}, size_t{21}, bytes.size() / 3, bytes.size() / 2,
                   bytes.size() - 22, bytes.size() - 1}) {
    INFO("truncated to " << n << " of " << bytes.size() << " bytes");
    CHECK_THAT(outcome(bytes.substr(0, n), original), Catch::StartsWith(kCorrupt));
  }
}

TEST_CASE("load_tensors rejects every byte-flipped buffer", "[io][bad_input]") {
  // Every single byte of the archive, flipped. torch's zip reader checks no CRC, so without
  // frugal's seal a flip inside tensor data would load changed values silently, and a flip in a
  // pickled length would make torch's unpickler allocate gigabytes before failing.
  NamedTensors original = sample();
  std::string bytes = io::save_tensors(original);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0xff);
    INFO("byte " << i << " of " << bytes.size() << " flipped");
    CHECK_THAT(outcome(damaged, original), Catch::StartsWith(kCorrupt));
  }

  // The flip that matters most: inside the float data of the first tensor (values 0..11).
  float first[4] = {0, 1, 2, 3};
  size_t at = bytes.find(std::string(reinterpret_cast<const char*>(first), sizeof first));
  REQUIRE(at != std::string::npos);
  bytes[at + 5] ^= 0x01;
  CHECK(outcome(bytes, original) == kCorrupt + "checksum mismatch)");
}

TEST_CASE("load_tensors rejects a checkpoint that lost its checksum trailer", "[io][bad_input]") {
  std::string bytes = io::save_tensors(sample());
  std::string cut = bytes.substr(0, bytes.size() - 31);
  cut[cut.size() - 2] = 0;  // a valid, comment-less zip again: only the seal is gone
  CHECK(outcome(cut, sample()) == kCorrupt + "the checksum trailer is missing)");
}

TEST_CASE("load_tensors rejects archives that hold something else", "[io][bad_input]") {
  std::vector<char> list = torch::pickle_save(c10::IValue(c10::List<int64_t>({1, 2})));
  CHECK_THAT(outcome(std::string(list.begin(), list.end()), {}),
             Catch::StartsWith(kCorrupt) && Catch::Contains("dict of tensors"));
  CHECK_THAT(outcome("not a zip archive at all", {}), Catch::StartsWith(kCorrupt));
}

TEST_CASE("read_safetensors rejects damaged files, naming them", "[io][bad_input]") {
  ScratchDir dir;
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data(8, '\0');
  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  std::vector<Case> cases{
      {"too short", "abc", "too short"},
      {"header beyond file", safetensors_bytes("{}", "").substr(0, 8) + "{}", ""},
      {"bad json", safetensors_bytes("{\"w\": [1,", data), "bad JSON header"},
      {"not an object", safetensors_bytes("[1, 2]", data), "not a JSON object"},
      {"unknown dtype",
       safetensors_bytes(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", data),
       "unknown dtype F33"},
      {"out of range",
       safetensors_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data),
       "out of range"},
      {"begin after end",
       safetensors_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data),
       "out of range"},
      {"size mismatch",
       safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
       "need 12"},
      {"overlap",
       safetensors_bytes(
           "{" + ok_entry + R"(,"v":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})", data),
       "overlap"},
      {"negative shape",
       safetensors_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
       "non-negative"},
      {"huge shape",
       safetensors_bytes(
           R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data),
       "too large"},
      // Empty, but torch's strides for the other dimensions would overflow: an uncaught c10
      // error before (fuzz/corpus/safetensors/regression-empty-shape-huge-dims.safetensors).
      {"empty, huge other dimensions",
       safetensors_bytes(
           R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", ""),
       "too large"},
      {"missing field", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2]}})", data), "lacks"},
      {"bad metadata", safetensors_bytes(R"({"__metadata__":{"a":1}})", ""), "not a string"},
  };
  // The header-length case: claims a 4 GiB header in a 10-byte file.
  cases[1].bytes = std::string("\x00\x00\x00\x00\x01\x00\x00\x00{}", 10);
  cases[1].message = "header length 4294967296 exceeds the file size 10";
  for (const Case& c : cases) {
    INFO(c.what);
    auto path = dir / "bad.safetensors";
    io::write_file_atomic(path, c.bytes);
    CHECK_THROWS_WITH(io::read_safetensors(path),
                      Catch::StartsWith("cannot read safetensors file '" + path.string() + "': ") &&
                          Catch::Contains(c.message));
  }
  // The well-formed control, so the cases above fail for the stated reason only.
  io::write_file_atomic(dir / "good.safetensors", safetensors_bytes("{" + ok_entry + "}", data));
  CHECK(io::read_safetensors(dir / "good.safetensors").size() == 1);
  CHECK_THROWS_WITH(
      io::read_safetensors(dir / "missing.safetensors"),
      "cannot read '" + (dir / "missing.safetensors").string() + "': No such file or directory");
}

TEST_CASE("writers refuse what their format cannot hold", "[io][bad_input]") {
  ScratchDir dir;
  CHECK_THROWS_WITH(io::write_safetensors(dir / "c.safetensors",
                                          {{"c", torch::ones({2}, torch::kComplexDouble)}}),
                    Catch::Contains("safetensors cannot store"));
  CHECK_THROWS_WITH(
      io::write_safetensors(dir / "m.safetensors", {{"__metadata__", torch::ones({2})}}),
      Catch::Contains("reserved"));
  CHECK_THROWS_WITH(io::write_pt(dir / "u.pt", {{"u", torch::ones({2}).to(torch::kUInt16)}}),
                    Catch::Contains("not supported in .pt files"));
  CHECK_THROWS_WITH(io::write_pt(dir / "no" / "dir.pt", {{"w", torch::ones({2})}}),
                    Catch::Contains("No such file or directory"));
  CHECK(dir.list().empty());
}
