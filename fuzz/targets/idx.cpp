// The IDX reader (MNIST-style images and labels). One input holds both files: its first byte
// k, then k bytes of the labels file, then the images file.
#include <algorithm>

#include "frugal/data/idx.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(idx) {
  if (size == 0) return 0;
  const std::string_view bytes = frugal::fuzz::as_text(data + 1, size - 1);
  const size_t labels_size = std::min<size_t>(data[0], bytes.size());
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string labels =
        frugal::fuzz::write_scratch_file("labels-idx1-ubyte", bytes.substr(0, labels_size));
    const std::string images =
        frugal::fuzz::write_scratch_file("images-idx3-ubyte", bytes.substr(labels_size));
    frugal::IdxDataset dataset(images, labels, "data.path", /*num_classes=*/10);
    if (dataset.size() > 0) dataset.get({0, dataset.size() - 1});
  });
}
