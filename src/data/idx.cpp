#include "frugal/data/idx.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "files.h"
#include "frugal/util/error.h"
#include "io/mapped_file.h"

namespace frugal {

namespace {

constexpr int64_t kImagesMagic = 0x00000803;  // uint8 data, 3 dimensions
constexpr int64_t kLabelsMagic = 0x00000801;  // uint8 data, 1 dimension

int64_t big_endian_u32(const uint8_t* p) {
  return (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | int64_t{p[3]};
}

// Checks the magic and returns the `ndim` dimensions after it; the data follows the header.
std::vector<int64_t> read_header(const detail::MappedFile& file, int64_t magic, int ndim,
                                 const char* what, const std::string& key) {
  const int64_t header = 4 * (1 + ndim);
  // The magic first: a wrong file (labels for images) is named as such, not as truncated.
  if (file.size() >= 4) {
    if (int64_t got = big_endian_u32(file.data()); got != magic) {
      throw Error(fmt::format("{}: '{}': bad magic 0x{:08x} (expected 0x{:08x}: IDX {})", key,
                              file.path(), got, magic, what));
    }
  }
  if (file.size() < header) {
    throw Error(fmt::format("{}: '{}': {} bytes is shorter than an IDX {} header ({} bytes)", key,
                            file.path(), file.size(), what, header));
  }
  std::vector<int64_t> dims;
  int64_t items = 1;
  for (int i = 0; i < ndim; ++i) {
    dims.push_back(big_endian_u32(file.data() + 4 * (1 + i)));
    // Corrupt dimensions can overflow the product; that can never match the file size.
    if (__builtin_mul_overflow(items, dims.back(), &items)) items = -1;
  }
  // size - header, not header + items: items near INT64_MAX would overflow the sum.
  if (items < 0 || file.size() - header != items) {
    throw Error(
        fmt::format("{}: '{}': the IDX header dimensions {} do not match the file's {} "
                    "bytes (truncated?)",
                    key, file.path(), fmt::join(dims, " x "), file.size()));
  }
  return dims;
}

}  // namespace

IdxDataset::IdxDataset(const std::string& images_path, const std::string& labels_path,
                       const std::string& key, int64_t num_classes) {
  const std::string labels_key = key == "data.path" ? "data.labels_path" : key;
  images_ = detail::MappedFile::open(images_path, key);
  labels_ = detail::MappedFile::open(labels_path, labels_key);
  auto image_dims = read_header(*images_, kImagesMagic, 3, "images", key);
  auto label_dims = read_header(*labels_, kLabelsMagic, 1, "labels", labels_key);
  n_ = image_dims[0];
  h_ = image_dims[1];
  w_ = image_dims[2];
  if (label_dims[0] != n_) {
    throw Error(fmt::format("{}: '{}' has {} labels but '{}' has {} images", labels_key,
                            labels_path, label_dims[0], images_path, n_));
  }
  if (num_classes > 0) {
    const uint8_t* labels = labels_->data() + 8;
    for (int64_t i = 0; i < n_; ++i) {
      if (labels[i] >= num_classes) {
        throw Error(fmt::format("{}: '{}': label {} at index {} is >= the model's {} classes",
                                labels_key, labels_path, labels[i], i, num_classes));
      }
    }
  }
}

Batch IdxDataset::get(const std::vector<int64_t>& indices) const {
  const auto batch = static_cast<int64_t>(indices.size());
  const int64_t pixels = h_ * w_;
  at::Tensor x = at::empty({batch, 1, h_, w_}, at::kFloat);  // (B, 1, H, W)
  at::Tensor y = at::empty({batch}, at::kLong);              // (B)
  float* xs = x.data_ptr<float>();
  int64_t* ys = y.data_ptr<int64_t>();
  const uint8_t* images = images_->data() + 16;
  const uint8_t* labels = labels_->data() + 8;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t i = indices[static_cast<size_t>(b)];
    if (i < 0 || i >= n_) {
      throw std::out_of_range(fmt::format("IdxDataset: sample {} outside [0, {})", i, n_));
    }
    const uint8_t* image = images + i * pixels;
    for (int64_t p = 0; p < pixels; ++p) xs[b * pixels + p] = image[p] / 255.0f;
    ys[b] = labels[i];
  }
  return {x, y};
}

std::string default_idx_labels_path(const std::string& images_path) {
  std::string name = detail::file_name(images_path);
  const std::string dir = images_path.substr(0, images_path.size() - name.size());
  bool changed = false;
  for (auto [from, to] : {std::pair{"images", "labels"}, std::pair{"idx3", "idx1"}}) {
    if (auto at = name.find(from); at != std::string::npos) {
      name.replace(at, std::string_view(from).size(), to);
      changed = true;
    }
  }
  return changed ? dir + name : std::string();
}

}  // namespace frugal
