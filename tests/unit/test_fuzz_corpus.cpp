// The fuzz targets' seed corpora (fuzz/corpus/<target>/: valid inputs, broken ones and every
// input that once found a problem) replayed through the same entry points the fuzzers drive
// (fuzz/targets/*.cpp), in the ordinary build: each reader answers every input with a result
// or a frugal::Error, nothing else. tools/fuzz.sh fuzzes them for real.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "frugal/io/atomic_file.h"
#include "fuzz_input.h"
#include "support/helpers.h"

int frugal_fuzz_config(const uint8_t* data, size_t size);
int frugal_fuzz_safetensors(const uint8_t* data, size_t size);
int frugal_fuzz_checkpoint(const uint8_t* data, size_t size);
int frugal_fuzz_tokens(const uint8_t* data, size_t size);
int frugal_fuzz_idx(const uint8_t* data, size_t size);
int frugal_fuzz_hf_config(const uint8_t* data, size_t size);
int frugal_fuzz_tokenizer_json(const uint8_t* data, size_t size);
int frugal_fuzz_sentencepiece(const uint8_t* data, size_t size);
int frugal_fuzz_reshard(const uint8_t* data, size_t size);
int frugal_fuzz_chat(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

using Entry = int (*)(const uint8_t*, size_t);

void replay_corpus(const std::string& target, Entry entry) {
  const fs::path dir = frugal::test::source_dir() / "fuzz/corpus" / target;
  std::vector<fs::path> inputs;
  for (const auto& file : fs::directory_iterator(dir)) inputs.push_back(file.path());
  REQUIRE(inputs.size() >= 3);
  for (const fs::path& input : inputs) {
    INFO(input.string());
    const std::string bytes = frugal::io::read_file(input);
    CHECK(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
}

}  // namespace

TEST_CASE("fuzz corpus: config", "[unit][fuzz]") { replay_corpus("config", frugal_fuzz_config); }
TEST_CASE("fuzz corpus: safetensors", "[unit][fuzz]") {
  replay_corpus("safetensors", frugal_fuzz_safetensors);
}
TEST_CASE("fuzz corpus: checkpoint", "[unit][fuzz]") {
  replay_corpus("checkpoint", frugal_fuzz_checkpoint);
}
TEST_CASE("fuzz corpus: tokens", "[unit][fuzz]") { replay_corpus("tokens", frugal_fuzz_tokens); }
TEST_CASE("fuzz corpus: idx", "[unit][fuzz]") { replay_corpus("idx", frugal_fuzz_idx); }
TEST_CASE("fuzz corpus: hf_config", "[unit][fuzz]") {
  replay_corpus("hf_config", frugal_fuzz_hf_config);
}
TEST_CASE("fuzz corpus: tokenizer_json", "[unit][fuzz]") {
  replay_corpus("tokenizer_json", frugal_fuzz_tokenizer_json);
}
TEST_CASE("fuzz corpus: sentencepiece", "[unit][fuzz]") {
  replay_corpus("sentencepiece", frugal_fuzz_sentencepiece);
}
TEST_CASE("fuzz corpus: reshard", "[unit][fuzz]") { replay_corpus("reshard", frugal_fuzz_reshard); }
TEST_CASE("fuzz corpus: chat", "[unit][fuzz]") { replay_corpus("chat", frugal_fuzz_chat); }

// The replay's CHECK(entry(...) == 0) can fail: an entry answers a defect with non-zero.
TEST_CASE("fuzz entries answer a defect with non-zero", "[unit][fuzz]") {
  using frugal::fuzz::expect_frugal_errors_only;
  CHECK(expect_frugal_errors_only([] {}) == frugal::fuzz::kClean);
  CHECK(expect_frugal_errors_only([] { throw frugal::Error("x.json: key: expected y"); }) ==
        frugal::fuzz::kClean);
  // nlohmann's type error, as an unchecked json::get gives it: the CLI's exit 1.
  CHECK(expect_frugal_errors_only([] { throw std::out_of_range("type must be number"); }) ==
        frugal::fuzz::kOtherException);
  CHECK(expect_frugal_errors_only([] { throw frugal::Error("two\nlines"); }) ==
        frugal::fuzz::kBadMessage);
  CHECK(expect_frugal_errors_only([] { throw frugal::Error(""); }) == frugal::fuzz::kBadMessage);
}
