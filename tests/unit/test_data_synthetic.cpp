#include <catch2/catch.hpp>
#include <map>

#include "frugal/data/dataset.h"
#include "frugal/data/synthetic.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

namespace {

ModelConfig model_of(const std::string& type) {
  ModelConfig model;
  model.type = type;
  model.vocab_size = 50;
  model.block_size = 16;
  model.in_features = 8;
  model.out_features = 3;
  model.in_channels = 2;
  model.image_size = 5;
  model.num_classes = 4;
  return model;
}

bool same(const Batch& a, const Batch& b) { return at::equal(a.x, b.x) && at::equal(a.y, b.y); }

}  // namespace

TEST_CASE("synthetic: shapes, sizes and determinism for each model type", "[data][unit]") {
  DataConfig data;
  data.synthetic_samples = 200;
  const std::vector<int64_t> indices = {0, 5, 63, 5};
  for (const char* type : {"gpt", "mlp", "convnet"}) {
    INFO(type);
    ModelConfig model = model_of(type);
    auto a = make_dataset(data, model, Split::train, 7);
    auto b = make_dataset(data, model, Split::train, 7);
    auto c = make_dataset(data, model, Split::train, 8);
    auto v = make_dataset(data, model, Split::val, 7);
    CHECK(a->size() == 200);
    CHECK(v->size() == 64);  // max(64, 200 / 10)
    Batch batch = a->get(indices);
    CHECK(same(batch, b->get(indices)));
    CHECK(!same(batch, c->get(indices)));
    CHECK(!same(batch, v->get(indices)));
    CHECK(at::equal(batch.x[1], batch.x[3]));  // sample 5 twice
    CHECK(!at::equal(batch.x[0], batch.x[1]));
    CHECK(batch.y.scalar_type() == at::kLong);
    if (std::string(type) == "gpt") {
      CHECK(batch.x.sizes() == at::IntArrayRef({4, 16}));
      CHECK(batch.y.sizes() == at::IntArrayRef({4, 16}));
      CHECK(at::equal(batch.x.slice(1, 1), batch.y.slice(1, 0, 15)));  // next-token targets
      CHECK(batch.y.max().item<int64_t>() < 50);
    } else if (std::string(type) == "mlp") {
      CHECK(batch.x.sizes() == at::IntArrayRef({4, 8}));
      CHECK(batch.x.scalar_type() == at::kFloat);
      CHECK(batch.y.sizes() == at::IntArrayRef({4}));
    } else {
      CHECK(batch.x.sizes() == at::IntArrayRef({4, 2, 5, 5}));
      CHECK(batch.y.sizes() == at::IntArrayRef({4}));
    }
  }
  data.synthetic_samples = 5000;
  CHECK(make_dataset(data, model_of("mlp"), Split::val, 1)->size() == 500);
  data.val_fraction = 0;
  CHECK(make_dataset(data, model_of("mlp"), Split::val, 1)->size() == 0);
}

TEST_CASE("synthetic gpt: tokens mostly follow one fixed successor each", "[data][unit]") {
  DataConfig data;
  data.synthetic_samples = 100;
  auto train = make_dataset(data, model_of("gpt"), Split::train, 3);
  auto val = make_dataset(data, model_of("gpt"), Split::val, 3);
  // The rule (seeded by the run seed) is shared by train and val: count successor pairs.
  std::map<std::pair<int64_t, int64_t>, int> pairs;
  std::map<int64_t, int> from;
  for (const auto& ds : {train, val}) {
    Batch b = ds->get(range(0, ds->size()));
    std::vector<int64_t> x = to_vector(b.x), y = to_vector(b.y);
    for (size_t i = 0; i < x.size(); ++i) ++pairs[{x[i], y[i]}], ++from[x[i]];
  }
  int top = 0, total = 0;
  for (auto [token, count] : from) {
    int best = 0;
    for (auto [pair, n] : pairs) best = pair.first == token ? std::max(best, n) : best;
    top += best;
    total += count;
  }
  double consistency = double(top) / total;
  CHECK(consistency > 0.85);  // 0.9 + 0.1 / 50 expected
  CHECK(consistency < 0.95);
}

TEST_CASE("synthetic mlp/convnet: labels in range and not constant", "[data][unit]") {
  DataConfig data;
  data.synthetic_samples = 300;
  for (const char* type : {"mlp", "convnet"}) {
    INFO(type);
    ModelConfig model = model_of(type);
    Batch b = make_dataset(data, model, Split::train, 1)->get(range(0, 300));
    int64_t classes = std::string(type) == "mlp" ? 3 : 4;
    CHECK(b.y.min().item<int64_t>() == 0);
    CHECK(b.y.max().item<int64_t>() == classes - 1);
  }
  ModelConfig user = model_of("my_model");
  CHECK_THAT(error_message([&] { make_dataset(data, user, Split::train, 1); }),
             Catch::Contains("no synthetic data for model.type 'my_model'"));
}
