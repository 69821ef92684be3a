// Reading trusts nothing in the file: every length and offset is checked against the file size
// before memory is allocated or read, so a damaged or hostile file gives one clear error.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <c10/util/strides.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "fd.h"
#include "io/mapped_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/util/error.h"
#include "safetensors_dtype.h"

namespace frugal::io {
namespace {

// The deleter of map_safetensors' storages: drops their reference to the map.
void drop_map_reference(void* context) {
  delete static_cast<std::shared_ptr<const frugal::detail::MappedFile>*>(context);
}


static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

// The limit the reference implementation enforces: a header larger than this is not a header.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Entry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path)
      // O_NONBLOCK: a named pipe would otherwise block the open until a writer comes; it is
      // refused below. Reads of a regular file are unaffected.
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    if (fd_.get() < 0) fail_errno();
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) fail_errno();
    if (S_ISDIR(st.st_mode)) fail("it is a directory");
    if (!S_ISREG(st.st_mode)) fail("not a regular file (a pipe, socket or device)");
    uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < 8) fail(fmt::format("{} bytes is too short for a safetensors file", file_size));
    uint64_t header_size = 0;
    read_at(0, &header_size, sizeof header_size);
    if (header_size > file_size - 8 || header_size > kMaxHeaderBytes) {
      fail(fmt::format("header length {} exceeds the file size {}", header_size, file_size));
    }
    data_start_ = 8 + header_size;
    data_size_ = file_size - data_start_;
    std::string text(header_size, '\0');
    read_at(8, text.data(), text.size());
    parse_header(text);
  }

  const std::vector<Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  at::Tensor load(const Entry& e) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    read_at(data_start_ + e.begin, t.mutable_data_ptr(), e.end - e.begin);
    return t;
  }

  // A view of the mapped bytes, keeping the map alive; a copy when misaligned.
  at::Tensor view(const Entry& e, const std::shared_ptr<const frugal::detail::MappedFile>& map) {
    const uint8_t* p = map->data() + data_start_ + e.begin;
    if (map->data() == nullptr || reinterpret_cast<uintptr_t>(p) % c10::elementSize(e.dtype) != 0) {
      return load(e);
    }
    // The storage holds the map alive, under a deleter of its own that release_mapped_pages
    // recognises.
    const auto bytes = static_cast<size_t>(e.end - e.begin);
    at::DataPtr data(const_cast<uint8_t*>(p), new std::shared_ptr<const frugal::detail::MappedFile>(map),
                     &drop_map_reference, at::Device(at::kCPU));
    at::Storage storage(at::Storage::use_byte_size_t(), bytes, std::move(data), nullptr, false);
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(e.dtype));
    t.set_(storage, 0, e.shape, c10::contiguous_strides(e.shape));
    return t;
  }

 private:
  [[noreturn]] void fail(std::string_view reason) const {
    throw Error(fmt::format("cannot read safetensors file '{}': {}", path_.string(), reason));
  }
  [[noreturn]] void fail_errno() const {
    throw Error(fmt::format("cannot read '{}': {}", path_.string(), std::strerror(errno)));
  }

  void read_at(uint64_t offset, void* buf, uint64_t n) {
    auto* out = static_cast<char*>(buf);
    while (n > 0) {
      ssize_t got = ::pread(fd_.get(), out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail_errno();
      if (got == 0) fail("the file ended early (was it truncated while being read?)");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  }

  uint64_t unsigned_int(const nlohmann::json& v, const std::string& name, const char* what) {
    if (!v.is_number_unsigned()) {
      fail(fmt::format("tensor '{}': {} must hold non-negative integers", name, what));
    }
    return v.get<uint64_t>();
  }

  void parse_header(const std::string& text) {
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("bad JSON header ({})", e.what()));
    }
    if (!header.is_object()) fail("the header is not a JSON object");
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        parse_metadata(value);
      } else {
        entries_.push_back(parse_entry(name, value));
      }
    }
    // Offsets, not JSON key order, give the order tensors were written in.
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (size_t i = 1; i < entries_.size(); ++i) {
      if (entries_[i].begin < entries_[i - 1].end) {
        fail(fmt::format("tensors '{}' and '{}' overlap", entries_[i - 1].name, entries_[i].name));
      }
    }
  }

  void parse_metadata(const nlohmann::json& value) {
    if (!value.is_object()) fail("__metadata__ is not a JSON object");
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string()) fail(fmt::format("__metadata__ entry '{}' is not a string", key));
      metadata_[key] = v.get<std::string>();
    }
  }

  Entry parse_entry(const std::string& name, const nlohmann::json& value) {
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      fail(fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    }
    const auto& dtype = value["dtype"];
    std::string dtype_name = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();
    auto type = detail::safetensors_dtype_from_name(dtype_name);
    if (!type) fail(fmt::format("tensor '{}' has unknown dtype {}", name, dtype_name));
    Entry e{name, *type, {}, 0, 0};

    const auto& shape = value["shape"];
    if (!shape.is_array()) fail(fmt::format("tensor '{}': shape is not an array", name));
    // The bytes the shape spans, with each 0 counted as 1: torch computes strides that way, so
    // an empty tensor whose other dimensions are absurd ([0, 2^62, 2^62]) must fail here too,
    // not in torch's stride arithmetic. Overflow can only come from a damaged header: no
    // tensor has 2^63 bytes.
    uint64_t extent = c10::elementSize(*type);
    bool empty = false;
    for (const auto& dim : shape) {
      uint64_t d = unsigned_int(dim, name, "shape");
      if (__builtin_mul_overflow(extent, std::max<uint64_t>(d, 1), &extent) ||
          extent > static_cast<uint64_t>(INT64_MAX)) {
        fail(fmt::format("tensor '{}': shape is too large", name));
      }
      empty = empty || d == 0;
      e.shape.push_back(static_cast<int64_t>(d));
    }
    const uint64_t bytes = empty ? 0 : extent;

    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      fail(fmt::format("tensor '{}': data_offsets must be [begin, end]", name));
    }
    e.begin = unsigned_int(offsets[0], name, "data_offsets");
    e.end = unsigned_int(offsets[1], name, "data_offsets");
    if (e.begin > e.end || e.end > data_size_) {
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] are out of range (data is {} bytes)",
                       name, e.begin, e.end, data_size_));
    }
    if (e.end - e.begin != bytes) {
      fail(fmt::format("tensor '{}': data_offsets span {} bytes, its dtype and shape need {}", name,
                       e.end - e.begin, bytes));
    }
    return e;
  }

  std::filesystem::path path_;
  detail::Fd fd_;
  uint64_t data_start_ = 0;
  uint64_t data_size_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace

NamedTensors read_safetensors(const std::filesystem::path& path) {
  SafetensorsFile file(path);
  NamedTensors out;
  out.reserve(file.entries().size());
  for (const Entry& e : file.entries()) out.emplace_back(e.name, file.load(e));
  return out;
}

NamedTensors map_safetensors(const std::filesystem::path& path) {
  SafetensorsFile file(path);  // validates the header before anything is mapped
  const auto map = frugal::detail::MappedFile::open(path.string(), "safetensors");
  NamedTensors out;
  out.reserve(file.entries().size());
  for (const Entry& e : file.entries()) out.emplace_back(e.name, file.view(e, map));
  return out;
}

bool release_mapped_pages(const at::Tensor& t) {
  if (!t.defined() || t.storage().data_ptr().get_deleter() != &drop_map_reference || t.numel() == 0) {
    return false;
  }
  // The pages holding the tensor's bytes, whole (neighbours' bytes on a shared page are read
  // again from the page cache when next used: the map is private and read-only).
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const auto last = first + t.nbytes();
  const uintptr_t begin = first / page * page, end = (last + page - 1) / page * page;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) == 0;
}

std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& path) {
  return SafetensorsFile(path).metadata();
}

}  // namespace frugal::io
