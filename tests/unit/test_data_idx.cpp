#include <catch2/catch.hpp>

#include "frugal/data/dataset.h"
#include "frugal/data/idx.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

TEST_CASE("IDX: exact pixels scaled to [0, 1] and labels", "[data][unit]") {
  DataDir dir;
  // 3 images of 2 x 3 pixels.
  std::vector<uint8_t> pixels = {0,  51, 102, 153, 204, 255,   // image 0
                                 1,  2,  3,   4,   5,   6,     // image 1
                                 10, 20, 30,  40,  50,  255};  // image 2
  write_idx_images(dir / "train-images-idx3-ubyte", 3, 2, 3, pixels);
  write_idx_labels(dir / "train-labels-idx1-ubyte", {7, 0, 9});
  IdxDataset ds(dir / "train-images-idx3-ubyte", dir / "train-labels-idx1-ubyte", "data.path");
  CHECK(ds.size() == 3);
  CHECK(ds.height() == 2);
  CHECK(ds.width() == 3);
  Batch b = ds.get({2, 0});
  CHECK(b.x.sizes() == at::IntArrayRef({2, 1, 2, 3}));
  CHECK(b.x.scalar_type() == at::kFloat);
  CHECK(b.y.scalar_type() == at::kLong);
  at::Tensor expected = at::tensor({10, 20, 30, 40, 50, 255, 0, 51, 102, 153, 204, 255}, at::kFloat)
                            .div(255.0)
                            .view({2, 1, 2, 3});
  CHECK(at::equal(b.x, expected));
  CHECK(b.x[1][0][1][2].item<float>() == 1.0f);
  CHECK(to_vector(b.y) == std::vector<int64_t>{9, 7});
}

TEST_CASE("IDX: labels path derived from the images path", "[data][unit]") {
  CHECK(default_idx_labels_path("/d/train-images-idx3-ubyte") == "/d/train-labels-idx1-ubyte");
  CHECK(default_idx_labels_path("/images/t10k-images.idx3-ubyte") ==
        "/images/t10k-labels.idx1-ubyte");  // only the file name changes
  CHECK(default_idx_labels_path("/d/pictures.bin").empty());

  DataDir dir;
  write_idx_images(dir / "train-images-idx3-ubyte", 4, 1, 1, {0, 85, 170, 255});
  write_idx_labels(dir / "train-labels-idx1-ubyte", {1, 2, 3, 4});
  DataConfig data;
  data.type = "idx";
  data.path = dir / "train-images-idx3-ubyte";
  data.val_fraction = 0.25;
  ModelConfig model;
  model.type = "convnet";
  auto train = make_dataset(data, model, Split::train, 0);
  auto val = make_dataset(data, model, Split::val, 0);
  CHECK(train->size() == 3);
  CHECK(val->size() == 1);
  CHECK(to_vector(val->get({0}).y) == std::vector<int64_t>{4});
  CHECK(val->get({0}).x.item<float>() == 1.0f);
}
