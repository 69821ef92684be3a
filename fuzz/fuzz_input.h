// What every fuzz target shares (fuzz/targets/*.cpp). A target feeds one input to a real
// frugal reader: a frugal::Error of one line is the expected answer to bad bytes and is
// swallowed; anything else (another exception, a message of several lines, a crash, a sanitizer
// report, an allocation past libFuzzer's limit) is a finding. The same entry points run under libFuzzer (the fuzz build, FRUGAL_FUZZ) and over
// the seed corpora in the ordinary test suite (tests/unit/test_fuzz_corpus.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "frugal/util/error.h"

namespace frugal::fuzz {

// The input as bytes (readers take text or paths, not pointers).
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A folder of this process's own for the files a target writes (made once, removed at exit),
// so that parallel fuzzers and test runs never share a file.
const std::string& scratch_dir();

// Writes `bytes` to `path`, replacing it; plainly, without the fsync of frugal's atomic writes
// (a fuzzer writes thousands of files a second).
void write_bytes(const std::string& path, std::string_view bytes);

// Writes `bytes` to scratch_dir()/name and returns the path.
std::string write_scratch_file(const std::string& name, std::string_view bytes);

// What an entry answers: 0 when the reader gave a result or a clean frugal::Error, else the
// defect it showed. Under libFuzzer a defect aborts (a finding, with the input saved); in the
// test suite the entry returns it, so that the corpus replay's CHECK(entry(...) == 0) fails
// and names the input.
enum Defect : int {
  kClean = 0,
  kOtherException = 1,  // not frugal::Error: the CLI would report an internal error (exit 1)
  kBadMessage = 2,      // a frugal::Error that is not one non-empty line
};

// Reports a defect (on stderr, with the exception's text) and answers it as above.
int defect(Defect kind, const char* what);

// True when a frugal::Error's text is what the CLI may print as its one line.
bool is_one_line(std::string_view message);

// Runs `read`: a frugal::Error of one line is the expected answer to bad input; any other
// exception, or an error message of several lines, is a defect.
template <class Read>
int expect_frugal_errors_only(Read&& read) {
  try {
    read();
  } catch (const frugal::Error& e) {
    if (!is_one_line(e.what())) return defect(kBadMessage, e.what());
  } catch (const std::exception& e) {
    return defect(kOtherException, e.what());
  }
  return kClean;
}

}  // namespace frugal::fuzz

// Each target defines its entry point as FRUGAL_FUZZ_ENTRY(name): under libFuzzer it is
// LLVMFuzzerTestOneInput (one target per executable), in the test suite a function of its own
// name (every target in one binary).
#ifdef FRUGAL_FUZZ_LIBFUZZER
#define FRUGAL_FUZZ_ENTRY(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define FRUGAL_FUZZ_ENTRY(name) int frugal_fuzz_##name(const uint8_t* data, size_t size)
#endif
