// Instruction data: tokenized JSONL read with its refusals and truncation, best-fit-decreasing
// packing, and the rows a model sees (shifted labels, position ids per packed sample, padding
// that is never a target).
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <set>

#include "frugal/data/batch.h"
#include "frugal/data/instruction_data.h"
#include "frugal/engine/engine.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/instruction_samples.h"

using namespace frugal;

namespace instruction_data_test {

std::vector<LabeledTokens> read(const std::string& jsonl, int64_t max_tokens = 100,
                                const std::string& truncate = "right",
                                InstructionStats* stats = nullptr,
                                const std::string& no_target = "skip") {
  test::TempDir dir("frugal-tokenized");
  test::write_text(dir / "data.jsonl", jsonl);
  return read_tokenized_samples(dir / "data.jsonl", 50, {max_tokens, truncate, no_target}, stats);
}

std::vector<int64_t> row(const at::Tensor& t, int64_t b) {
  const at::Tensor r = t[b].contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

}  // namespace instruction_data_test

using namespace instruction_data_test;

TEST_CASE("tokenized JSONL reads ids and labels and refuses bad lines",
          "[unit][data][instruction]") {
  InstructionStats stats;
  const auto s = read(
      "{\"input_ids\": [1, 2, 3, 4], \"labels\": [-100, -100, 3, 4]}\n\n"
      "{\"input_ids\": [5, 6, 7]}\n"
      "{\"input_ids\": [8, 9], \"labels\": [-100, -100]}\n",
      100, "right", &stats);
  REQUIRE(s.size() == 2);
  CHECK(s[0].labels == std::vector<int32_t>{-100, -100, 3, 4});
  CHECK(s[1].labels == std::vector<int32_t>{5, 6, 7});  // no labels: every token is learned
  CHECK(stats.samples == 2);
  CHECK(stats.no_target == 1);  // nothing to learn: dropped, counted

  CHECK_THROWS_WITH(read("{\"input_ids\": [1, 2]}\nnot json\n"),
                    Catch::Contains("data.jsonl:2:") && Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(read("{\"input_ids\": [1, 50]}\n"),
                    Catch::Contains("data.jsonl:1:") &&
                        Catch::Contains("input_ids[1]: expected a token id from 0 to 49, got 50"));
  CHECK_THROWS_WITH(read("{\"input_ids\": [1, 2], \"labels\": [1]}\n"),
                    Catch::Contains("labels: 1 of them for 2 input_ids"));
  CHECK_THROWS_WITH(read("{\"labels\": [1]}\n"),
                    Catch::Contains("input_ids: expected an array of token ids"));
  CHECK_THROWS_WITH(read("[1, 2]\n"), Catch::Contains("expected a JSON object"));
}

TEST_CASE("samples longer than seq_len plus one are cut or refused", "[unit][data][instruction]") {
  const std::string line = "{\"input_ids\": [1, 2, 3, 4, 5, 6]}\n";
  InstructionStats stats;
  CHECK(read(line, 4, "right", &stats)[0].ids == std::vector<int32_t>{1, 2, 3, 4});
  CHECK(stats.truncated == 1);
  CHECK(read(line, 4, "left")[0].ids == std::vector<int32_t>{3, 4, 5, 6});
  CHECK_THROWS_WITH(read(line, 4, "error"),
                    Catch::Contains("data.jsonl:1:") && Catch::Contains("6 tokens, longer than"));
}

TEST_CASE("samples with nothing to learn are skipped and counted or refused",
          "[unit][data][instruction]") {
  const std::string lines =
      "{\"input_ids\": [1, 2, 3]}\n"
      "{\"input_ids\": [1, 2, 3], \"labels\": [-100, -100, -100]}\n";
  InstructionStats stats;
  CHECK(read(lines, 100, "right", &stats).size() == 1);
  CHECK(stats.no_target == 1);
  CHECK(stats.samples == 1);
  CHECK_THROWS_WITH(read(lines, 100, "right", nullptr, "error"),
                    Catch::Contains("data.jsonl:2:") && Catch::Contains("nothing to learn") &&
                        Catch::Contains("data.no_target: error"));
}

TEST_CASE("best-fit-decreasing packs a heavy-tailed length set at least 95 percent full",
          "[unit][data][instruction]") {
  // Pareto-like lengths (many short, a few up to the row's length), as chat data has them.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(1e-3, 1.0);
  const int64_t capacity = 512;
  std::vector<int64_t> lengths;
  int64_t total = 0;
  for (int i = 0; i < 3000; ++i) {
    lengths.push_back(
        std::min<int64_t>(capacity, 8 + static_cast<int64_t>(20.0 / std::pow(u(rng), 0.9))));
    total += lengths.back();
  }
  CHECK(*std::max_element(lengths.begin(), lengths.end()) == capacity);
  const auto bins = pack_best_fit_decreasing(lengths, capacity);
  std::set<int64_t> seen;
  for (const auto& bin : bins) {
    int64_t used = 0;
    for (int64_t i : bin) {
      used += lengths[i];
      CHECK(seen.insert(i).second);  // each item once
    }
    CHECK(used <= capacity);
  }
  CHECK(seen.size() == lengths.size());
  const double fill = static_cast<double>(total) / static_cast<double>(bins.size() * capacity);
  std::cout << "best-fit-decreasing: " << lengths.size() << " samples in " << bins.size()
            << " rows, " << 100.0 * fill << "% real tokens\n";
  CHECK(fill >= 0.95);
  // Deterministic: the same input gives the same bins.
  CHECK(pack_best_fit_decreasing(lengths, capacity) == bins);
}

TEST_CASE("instruction rows shift labels and keep padding out of the loss",
          "[unit][data][instruction]") {
  auto sample = [](std::vector<int32_t> ids, std::vector<int32_t> labels) {
    return LabeledTokens{std::move(ids), std::move(labels)};
  };
  // a: 4 tokens (3 positions), the last two learned; b: 3 tokens (2 positions), all learned.
  const std::vector<LabeledTokens> samples = {sample({1, 2, 3, 4}, {-100, -100, 3, 4}),
                                              sample({5, 6, 7}, {5, 6, 7})};
  SECTION("padded to the batch's longest") {
    InstructionDataset d(samples, 8, false);
    REQUIRE(d.size() == 2);
    const Batch b = d.get({1, 0});
    CHECK(b.x.sizes() == at::IntArrayRef{2, 3});
    CHECK(row(b.x, 0) == std::vector<int64_t>{5, 6, 0});
    CHECK(row(b.y, 0) == std::vector<int64_t>{6, 7, -100});
    CHECK(row(b.y, 1) == std::vector<int64_t>{-100, 3, 4});
    CHECK(!b.position_ids.defined());
    CHECK(b.num_targets() == 4);
  }
  SECTION("packed into one row with position ids per sample") {
    InstructionDataset d(samples, 8, true);
    REQUIRE(d.size() == 1);
    const Batch b = d.get({0});
    CHECK(row(b.x, 0) == std::vector<int64_t>{1, 2, 3, 5, 6, 0, 0, 0});
    CHECK(row(b.y, 0) == std::vector<int64_t>{-100, 3, 4, 6, 7, -100, -100, -100});
    CHECK(row(b.position_ids, 0) == std::vector<int64_t>{0, 1, 2, 0, 1, 0, 1, 2});
    CHECK(d.fill() == Approx(5.0 / 8.0));
  }
}

TEST_CASE("token-capped batches hold at most max_tokens_per_batch positions and split at them",
          "[unit][data][instruction]") {
  // Heavy-tailed lengths: 400 samples of 3 to 129 tokens.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(1e-3, 1.0);
  std::vector<LabeledTokens> samples;
  for (int i = 0; i < 400; ++i) {
    const auto n = std::min<int32_t>(129, 3 + static_cast<int32_t>(6.0 / std::pow(u(rng), 0.8)));
    std::vector<int32_t> ids(static_cast<size_t>(n), i % 50);
    samples.push_back({ids, ids});
  }
  const int64_t cap = 256, max_rows = 16;
  InstructionDataset capped(samples, 128, false, cap, max_rows);
  InstructionDataset plain(samples, 128, false);
  std::multiset<int64_t> seen;  // each sample's first token, once per sample
  for (int64_t i = 0; i < capped.size(); ++i) {
    const Batch b = capped.get({i});
    CHECK(b.x.numel() <= cap);
    CHECK(b.size() <= max_rows);
    REQUIRE(b.parts.size() == 1);
    CHECK(b.parts[0].rows == b.size());
    CHECK(b.parts[0].positions == b.x.size(1));
    for (int64_t r = 0; r < b.size(); ++r) seen.insert(b.x[r][0].item<int64_t>());
  }
  std::multiset<int64_t> want;
  for (const auto& s : samples) want.insert(s.ids[0]);
  CHECK(seen == want);
  CHECK(capped.rows() == 400);
  // Rows of like length together: little padding, where 16 random rows a batch pad much more.
  std::cout << "token-capped batches: " << capped.size() << ", " << 100.0 * capped.fill()
            << "% real\n";
  CHECK(capped.fill() > 0.9);
  double random_fill = 0;
  {
    int64_t real = 0, held = 0;
    for (int64_t i = 0; i + 16 <= plain.size(); i += 16) {
      std::vector<int64_t> idx(16);
      std::iota(idx.begin(), idx.end(), i);
      const Batch b = plain.get(idx);
      real += b.num_targets();
      held += b.x.numel();
    }
    random_fill = static_cast<double>(real) / static_cast<double>(held);
  }
  CHECK(capped.fill() > random_fill + 0.2);

  // Several items in one batch (accumulation): split_batch gives each item's batch exactly,
  // cut to its own length.
  const Batch joined = capped.get({3, 0, 5});
  REQUIRE(joined.parts.size() == 3);
  const auto micro = split_batch(joined, 3);
  REQUIRE(micro.size() == 3);
  const std::vector<int64_t> items = {3, 0, 5};
  for (size_t k = 0; k < 3; ++k) {
    const Batch alone = capped.get({items[k]});
    CHECK(micro[k].x.sizes() == alone.x.sizes());
    CHECK(at::equal(micro[k].x, alone.x));
    CHECK(at::equal(micro[k].y, alone.y));
  }
  CHECK_THROWS_WITH(split_batch(joined, 2), Catch::Contains("cannot split 3 token-capped"));
  // A row longer than the cap cannot be batched.
  CHECK_THROWS(InstructionDataset(samples, 128, false, 64, 16));
}

TEST_CASE("without val_path the file is read once for both splits", "[unit][data][instruction]") {
  test::TempDir dir("frugal-held-out");
  test::write_tokenized_samples(dir / "d.jsonl", 40, 50);
  DataConfig data;
  data.type = "tokenized";
  data.path = (dir / "d.jsonl").string();
  data.val_fraction = 0.25;
  data.seq_len = 48;
  ModelConfig model;
  model.type = "llama";
  model.vocab_size = 50;
  model.block_size = 48;
  auto whole_val = [&] {
    // The val split read on its own (nothing held out for it): the reference.
    return make_dataset(data, model, Split::val, 0);
  };
  const auto reference = whole_val();
  REQUIRE(reference->size() == 10);
  const auto train = make_dataset(data, model, Split::train, 0);
  CHECK(train->size() == 30);
  // The train split left the validation samples behind: the val split no longer reads the file.
  std::filesystem::rename(dir / "d.jsonl", dir / "moved.jsonl");
  const auto val = make_dataset(data, model, Split::val, 0);
  REQUIRE(val->size() == 10);
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  CHECK(at::equal(val->get(all).x, reference->get(all).x));
  CHECK(at::equal(val->get(all).y, reference->get(all).y));
  // ... and took them: a second val split reads again (and finds no file).
  CHECK_THROWS(make_dataset(data, model, Split::val, 0));
}
