#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>

#include "frugal/data/loader.h"
#include "frugal/data/sampler.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

namespace {

// Sample i is x = i, y = 10 i: a batch shows exactly which samples it holds.
class Indices : public Dataset {
 public:
  explicit Indices(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Batch get(const std::vector<int64_t>& indices) const override {
    for (int64_t i : indices) {
      if (i == fail_at_) throw std::runtime_error("sample " + std::to_string(i) + " is broken");
    }
    at::Tensor x = at::tensor(indices, at::kLong);  // (B)
    return {x, x * 10};
  }

 private:
  int64_t n_, fail_at_;
};

LoaderOptions options(int64_t batch, int64_t workers, uint64_t seed = 5) {
  LoaderOptions o{batch};
  o.seed = seed;
  o.num_workers = workers;
  return o;
}

std::vector<std::vector<int64_t>> take(DataLoader& loader, int n) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    Batch b = loader.next();
    CHECK(at::equal(b.y, b.x * 10));
    out.push_back(to_vector(b.x));
  }
  return out;
}

}  // namespace

TEST_CASE("loader: the same batches with 0, 1 and 3 workers", "[data][unit]") {
  auto ds = std::make_shared<Indices>(50);
  DataLoader sync(ds, options(4, 0));
  CHECK(sync.batches_per_epoch() == 12);  // 50 / 4, the last 2 samples dropped
  auto expected = take(sync, 40);         // over three epochs
  for (int64_t workers : {1, 3}) {
    DataLoader loader(ds, options(4, workers));
    CHECK(take(loader, 40) == expected);
  }
}

TEST_CASE("loader: epochs are permutations that roll over", "[data][unit]") {
  auto ds = std::make_shared<Indices>(10);
  DataLoader loader(ds, options(3, 2));
  CHECK(loader.position().epoch == 0);
  auto e0 = take(loader, 3);
  CHECK(loader.position().epoch == 1);
  CHECK(loader.position().batch == 0);
  take(loader, 2);
  CHECK(loader.position().batch == 2);
  auto flat = [](const auto& batches) {
    std::vector<int64_t> all;
    for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
    return all;
  };
  std::vector<int64_t> seen = flat(e0);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 9);  // distinct: one is dropped
  std::vector<int64_t> order0 = epoch_order(10, true, 5, 0);
  CHECK(seen == std::vector<int64_t>(order0.begin(), order0.begin() + 9));
  CHECK(epoch_order(10, true, 5, 1) != order0);
  CHECK(epoch_order(10, true, 5, 0) == order0);  // a pure function of (seed, epoch)
  CHECK(epoch_order(10, true, 6, 0) != order0);
  std::vector<int64_t> sorted = order0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == range(0, 10));

  LoaderOptions plain = options(3, 0);
  plain.shuffle = false;
  DataLoader sequential(ds, plain);
  CHECK(take(sequential, 4) ==
        std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 1, 2}});
}

TEST_CASE("loader: exact resume from a saved position", "[data][unit]") {
  auto ds = std::make_shared<Indices>(37);
  DataLoader reference(ds, options(4, 2));
  auto all = take(reference, 30);
  for (int64_t k : {0, 5, 9, 17}) {
    INFO("resume after " << k);
    DataLoader first(ds, options(4, 3));
    take(first, int(k));
    LoaderPosition saved = first.position();
    CHECK(saved.epoch * first.batches_per_epoch() + saved.batch == k);
    for (int64_t workers : {0, 1, 3}) {
      DataLoader resumed(ds, options(4, workers));
      resumed.set_position(saved);
      CHECK(take(resumed, int(30 - k)) == std::vector(all.begin() + k, all.end()));
    }
    // Moving an already running loader drops what it prefetched.
    first.set_position({0, 2});
    CHECK(take(first, 3) == std::vector(all.begin() + 2, all.begin() + 5));
  }
}

TEST_CASE("loader: ranks take disjoint slices of the world-1 batch", "[data][unit]") {
  auto ds = std::make_shared<Indices>(45);
  DataLoader world1(ds, options(6, 1));
  auto expected = take(world1, 12);  // 7 batches per epoch: crosses an epoch
  std::vector<std::vector<std::vector<int64_t>>> ranks;
  for (int rank : {0, 1}) {
    LoaderOptions o = options(3, rank == 0 ? 0 : 2);
    o.rank = rank;
    o.world_size = 2;
    DataLoader loader(ds, o);
    CHECK(loader.batches_per_epoch() == 7);
    ranks.push_back(take(loader, 12));
  }
  for (size_t b = 0; b < expected.size(); ++b) {
    std::vector<int64_t> joined = ranks[0][b];
    joined.insert(joined.end(), ranks[1][b].begin(), ranks[1][b].end());
    CHECK(joined == expected[b]);
  }
}

TEST_CASE("loader: worker errors reach next(), and shutdown never hangs", "[data][unit]") {
  LoaderOptions o = options(1, 2);
  o.shuffle = false;
  DataLoader loader(std::make_shared<Indices>(20, /*fail_at=*/3), o);
  take(loader, 3);
  CHECK_THROWS_WITH(loader.next(), "sample 3 is broken");
  CHECK_THROWS_WITH(loader.next(), "sample 3 is broken");  // not skipped
  loader.set_position({0, 4});
  CHECK(to_vector(loader.next().x) == std::vector<int64_t>{4});

  // Workers blocked on a full prefetch queue, or never started: both destroy promptly.
  for (int i = 0; i < 20; ++i) {
    DataLoader busy(std::make_shared<Indices>(100), options(2, 3));
    busy.next();
    DataLoader idle(std::make_shared<Indices>(100), options(2, 3));
  }
}

TEST_CASE("loader: too little data, pin_memory without CUDA", "[data][unit]") {
  DataLoader tiny(std::make_shared<Indices>(5), options(3, 1));
  LoaderOptions two_ranks = options(3, 0);
  two_ranks.world_size = 2;
  DataLoader split(std::make_shared<Indices>(5), two_ranks);
  CHECK(tiny.batches_per_epoch() == 1);
  CHECK(split.batches_per_epoch() == 0);
  CHECK_THAT(error_message([&] { split.next(); }),
             Catch::Contains("5 samples are fewer than one global batch of 6 = 3 per rank x 2 ranks"));
  CHECK_THAT(error_message([&] { DataLoader(std::make_shared<Indices>(5), options(0, 1)); }),
             Catch::Contains("data.micro_batch_size must be >= 1"));

  LoaderOptions pinned = options(2, 1);
  pinned.pin_memory = true;  // honoured with CUDA, ignored without
  DataLoader loader(std::make_shared<Indices>(8), pinned);
  Batch b = loader.next();
  CHECK(b.x.is_pinned() == at::globalContext().hasCUDA());

  DataConfig data;
  data.micro_batch_size = 16;
  data.num_workers = 0;
  LoaderOptions from = loader_options(data, 9, 1, 4);
  CHECK(from.batch_size == 16);
  CHECK(from.num_workers == 0);
  CHECK(from.seed == 9);
  CHECK(from.rank == 1);
  CHECK(from.world_size == 4);
}
