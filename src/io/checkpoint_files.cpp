#include "frugal/io/checkpoint_files.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "checkpoint_manifest.h"
#include "fd.h"
#include "frugal/io/hash.h"
#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "tensor_file.h"

namespace fs = std::filesystem;

namespace frugal::io {
namespace {

[[noreturn]] void no_tensor(const fs::path& path, const std::string& name) {
  throw Error(fmt::format("{}: holds no tensor '{}'", path.string(), name));
}

void check_range(const fs::path& path, const std::string& name, int64_t numel, int64_t begin,
                 int64_t count) {
  if (begin < 0 || count < 0 || begin > numel || count > numel - begin) {
    throw Error(fmt::format("{}: elements [{}, {}) of '{}' asked for, it has {}", path.string(),
                            begin, begin + count, name, numel));
  }
}

// A file with an index: block by block, each verified.
class IndexedFile final : public CheckpointFile {
 public:
  IndexedFile(fs::path path, detail::TensorFileSummary summary)
      : path_(std::move(path)), s_(std::move(summary)), fd_(::open(path_.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_.get() < 0) {
      throw Error(fmt::format("cannot read '{}': {}", path_.string(), std::strerror(errno)));
    }
    // In the file's order (the manifest's JSON lists them by name), so that a caller reading
    // them in turn reads each block once.
    std::sort(s_.tensors.begin(), s_.tensors.end(),
              [](const auto& a, const auto& b) { return a.second.offset < b.second.offset; });
    for (size_t i = 0; i < s_.tensors.size(); ++i) {
      names_.push_back(s_.tensors[i].first);
      index_[s_.tensors[i].first] = i;
    }
  }

  const std::vector<std::string>& names() const override { return names_; }
  bool has(const std::string& name) const override { return index_.count(name) > 0; }
  int64_t numel(const std::string& name) const override { return entry(name).numel(); }
  std::vector<int64_t> shape(const std::string& name) const override { return entry(name).shape; }
  at::ScalarType dtype(const std::string& name) const override { return entry(name).dtype; }
  int64_t bytes_read() const override { return bytes_read_; }
  int64_t position(const std::string& name, int64_t element) const override {
    const auto& e = entry(name);
    return e.offset + element * static_cast<int64_t>(c10::elementSize(e.dtype));
  }

  at::Tensor read(const std::string& name) override {
    const auto& e = entry(name);
    return read_range(name, 0, e.numel()).view(e.shape);
  }

  at::Tensor read_range(const std::string& name, int64_t begin, int64_t count) override {
    const auto& e = entry(name);
    check_range(path_, name, e.numel(), begin, count);
    at::Tensor out = at::empty({count}, at::TensorOptions().dtype(e.dtype));
    const int64_t item = static_cast<int64_t>(c10::elementSize(e.dtype));
    const int64_t first = e.offset + begin * item, last = first + count * item;
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t b = first / s_.block_bytes; first < last && b * s_.block_bytes < last; ++b) {
      const std::string& block = verified_block(b);
      const int64_t start = b * s_.block_bytes;
      const int64_t from = std::max(first, start), to = std::min(last, start + s_.block_bytes);
      std::memcpy(dst + (from - first), block.data() + (from - start), static_cast<size_t>(to - from));
    }
    return out;
  }

 private:
  const detail::TensorFileEntry& entry(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) no_tensor(path_, name);
    return s_.tensors[it->second].second;
  }

  // Block b of the file, read and checked against its hash; the last one read is kept, since
  // consecutive ranges often share a block.
  const std::string& verified_block(int64_t b) {
    if (b == cached_) return block_;
    const int64_t start = b * s_.block_bytes;
    const size_t size = static_cast<size_t>(std::min(s_.block_bytes, s_.bytes - start));
    block_.resize(size);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_.get(), block_.data() + done, size - done,
                                static_cast<off_t>(start + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(fmt::format("cannot read '{}': {}", path_.string(), std::strerror(errno)));
      if (n == 0) {
        throw Error(fmt::format("{}: truncated (ends before byte {}, manifest says {} bytes)",
                                path_.string(), start + static_cast<int64_t>(done), s_.bytes));
      }
      done += static_cast<size_t>(n);
    }
    bytes_read_ += static_cast<int64_t>(size);
    if (hex64(fnv1a64(block_)) != s_.blocks[static_cast<size_t>(b)]) {
      cached_ = -1;
      throw Error(fmt::format("{}: corrupt (the hash of bytes {}..{} does not match the manifest)",
                              path_.string(), start, start + static_cast<int64_t>(size)));
    }
    cached_ = b;
    return block_;
  }

  fs::path path_;
  detail::TensorFileSummary s_;
  detail::Fd fd_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> index_;
  std::string block_;
  int64_t cached_ = -1;
  int64_t bytes_read_ = 0;
};

// A file without an index: read and verified whole, kept.
class WholeFile final : public CheckpointFile {
 public:
  WholeFile(fs::path path, std::string bytes) : path_(std::move(path)), bytes_read_(bytes.size()) {
    for (auto& [name, t] : load_tensors(bytes, path_.string())) {
      names_.push_back(name);
      tensors_[name] = t;
    }
  }
  const std::vector<std::string>& names() const override { return names_; }
  bool has(const std::string& name) const override { return tensors_.count(name) > 0; }
  int64_t numel(const std::string& name) const override { return tensor(name).numel(); }
  std::vector<int64_t> shape(const std::string& name) const override {
    return tensor(name).sizes().vec();
  }
  at::ScalarType dtype(const std::string& name) const override { return tensor(name).scalar_type(); }
  int64_t bytes_read() const override { return bytes_read_; }
  int64_t position(const std::string&, int64_t) const override { return 0; }
  at::Tensor read(const std::string& name) override { return tensor(name); }
  at::Tensor read_range(const std::string& name, int64_t begin, int64_t count) override {
    const at::Tensor& t = tensor(name);
    check_range(path_, name, t.numel(), begin, count);
    return t.reshape({-1}).narrow(0, begin, count).clone();
  }

 private:
  const at::Tensor& tensor(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) no_tensor(path_, name);
    return it->second;
  }
  fs::path path_;
  int64_t bytes_read_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, at::Tensor> tensors_;
};

}  // namespace

struct CheckpointFiles::Impl {
  detail::Manifest manifest;
  std::map<std::string, std::unique_ptr<CheckpointFile>> open;
  int64_t index_bytes = 0;  // shards' index files read
};

CheckpointFiles::CheckpointFiles(fs::path checkpoint_dir)
    : impl_(std::make_unique<Impl>(Impl{detail::read_manifest(checkpoint_dir), {}})) {}

CheckpointFiles::~CheckpointFiles() = default;

bool CheckpointFiles::lists(const std::string& name) const { return impl_->manifest.lists(name); }

CheckpointFile& CheckpointFiles::file(const std::string& name) {
  auto it = impl_->open.find(name);
  if (it != impl_->open.end()) return *it->second;
  const detail::Manifest& m = impl_->manifest;
  const fs::path path = m.dir / name;
  std::unique_ptr<CheckpointFile> file;
  if (auto index = m.block_index(name, &impl_->index_bytes)) {
    file = std::make_unique<IndexedFile>(path, std::move(*index));
  } else {
    file = std::make_unique<WholeFile>(path, m.read_checked(name));
  }
  return *(impl_->open[name] = std::move(file));
}

int64_t CheckpointFiles::bytes_read() const {
  int64_t n = impl_->index_bytes;
  for (const auto& [_, f] : impl_->open) n += f->bytes_read();
  return n;
}

int64_t CheckpointFiles::total_bytes() const {
  int64_t n = 0;
  if (!impl_->manifest.lists_any()) return 0;
  for (const auto& [_, e] : impl_->manifest.json["files"].items()) n += e.value("bytes", int64_t{0});
  return n;
}

}  // namespace frugal::io
