// MNIST-style IDX files: images (magic 0x00000803: uint8, dims N, H, W) with labels (magic
// 0x00000801: uint8, dim N); header fields are big-endian int32. Files stay memory-mapped.
#pragma once

#include <memory>
#include <string>

#include "frugal/data/dataset.h"

namespace frugal {

namespace detail {
class MappedFile;
}

class IdxDataset : public Dataset {
 public:
  // Validates magics, sizes and that both files hold N items; labels must be < num_classes
  // when num_classes > 0. Errors name `key` (data.path or data.val_path) and the file.
  IdxDataset(const std::string& images_path, const std::string& labels_path, const std::string& key,
             int64_t num_classes = 0);

  int64_t size() const override { return n_; }
  // x: (B, 1, H, W) float32 in [0, 1] (pixel / 255); y: (B) int64 labels.
  Batch get(const std::vector<int64_t>& indices) const override;

  int64_t height() const { return h_; }
  int64_t width() const { return w_; }

 private:
  std::shared_ptr<const detail::MappedFile> images_, labels_;
  int64_t n_ = 0, h_ = 0, w_ = 0;
};

// The labels file next to an images file: "images" -> "labels" and "idx3" -> "idx1" in the
// file name (train-images-idx3-ubyte -> train-labels-idx1-ubyte); "" when neither occurs.
std::string default_idx_labels_path(const std::string& images_path);

}  // namespace frugal
