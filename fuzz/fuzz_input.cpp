#include "fuzz_input.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "frugal/io/remove_tree.h"

namespace frugal::fuzz {
namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "frugal-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("fuzz: mkdtemp failed");
    path = pattern;
  }
  // remove_tree, not std::filesystem::remove_all (frugal/io/remove_tree.h says why).
  ~ScratchDir() {
    try {
      io::remove_tree(path);
    } catch (const frugal::Error&) {
    }
  }
};

}  // namespace

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("fuzz: cannot write " + path);
}

std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  write_bytes(path, bytes);
  return path;
}

int defect(Defect kind, const char* what) {
  std::fprintf(stderr, "fuzz: defect: %s: %s\n",
               kind == kOtherException ? "an exception that is not frugal::Error"
                                       : "a frugal::Error that is not one line",
               what);
#ifdef FRUGAL_FUZZ_LIBFUZZER
  std::abort();  // libFuzzer reserves return values other than 0 and -1
#else
  return kind;
#endif
}

bool is_one_line(std::string_view message) {
  return !message.empty() && message.find('\n') == std::string_view::npos;
}

}  // namespace frugal::fuzz
