// Helpers for the data tests: a scratch directory and writers for each file format.
// POSIX calls rather than std::filesystem: libtorch.so exports old std::filesystem functions
// that win over libstdc++'s at run time, and some crash (remove_all).
#pragma once

#include <ATen/ATen.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "frugal/util/error.h"
#include "support/helpers.h"

namespace frugal::test::data {

// A scratch directory (frugal::test::TempDir) addressed by strings, as the data API takes.
class DataDir : public frugal::test::TempDir {
 public:
  DataDir() : frugal::test::TempDir("frugal-data"), str_(path().string()) {}
  std::string operator/(const std::string& name) const { return str_ + "/" + name; }
  const std::string& str() const { return str_; }

 private:
  std::string str_;
};

inline void make_dir(const std::string& path) { ::mkdir(path.c_str(), 0755); }

inline bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

inline int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

// Entries in `dir`, without "." and "..".
inline int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      n += name != "." && name != "..";
    }
    ::closedir(d);
  }
  return n;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

inline void write_nanogpt(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_bytes(path, bytes_of(tokens));
}

// count < 0: the true token count.
inline void write_llmc(const std::string& path, const std::vector<uint16_t>& tokens,
                       int32_t magic = 20240520, int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count < 0 ? int32_t(tokens.size()) : count;
  write_bytes(path, bytes_of(header) + bytes_of(tokens));
}

inline std::string big_endian(std::vector<uint32_t> values) {
  std::string out;
  for (uint32_t v : values) {
    for (int shift : {24, 16, 8, 0}) out.push_back(char((v >> shift) & 0xFF));
  }
  return out;
}

inline void write_idx_images(const std::string& path, uint32_t n, uint32_t h, uint32_t w,
                             const std::vector<uint8_t>& pixels) {
  write_bytes(path, big_endian({0x803, n, h, w}) + bytes_of(pixels));
}

inline void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels) {
  write_bytes(path, big_endian({0x801, uint32_t(labels.size())}) + bytes_of(labels));
}

inline std::vector<uint16_t> iota_tokens(int n, int first = 0) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens[size_t(i)] = uint16_t(first + i);
  return tokens;
}

inline std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

inline std::vector<int64_t> range(int64_t first, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = first; i < end; ++i) out.push_back(i);
  return out;
}

// The message of the frugal::Error `f` throws (a marker when it throws none).
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const frugal::Error& e) {
    return e.what();
  }
  return "<no frugal::Error thrown>";
}

}  // namespace frugal::test::data
