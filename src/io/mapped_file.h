// A read-only memory map of a whole file (private to src/). Token shards can be far larger
// than memory; mapping lets the page cache hold what is in use and lets every loader thread
// read the same bytes without locks or copies. The map lives as long as the last shared_ptr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace frugal::detail {

class MappedFile {
 public:
  // Throws frugal::Error "<key>: cannot open '<path>': <reason>" (key names the config field,
  // e.g. data.path, so the user knows which setting to fix).
  static std::shared_ptr<const MappedFile> open(const std::string& path, const std::string& key);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }  // nullptr for an empty file
  int64_t size() const { return size_; }         // bytes
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace frugal::detail
