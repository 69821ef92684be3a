#include <catch2/catch.hpp>
#include <thread>

#include "frugal/data/dataset.h"
#include "frugal/data/token_dataset.h"
#include "frugal/data/token_stream.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

namespace {

DataConfig tokens_config(const std::string& path, int64_t seq_len) {
  DataConfig data;
  data.type = "tokens";
  data.path = path;
  data.seq_len = seq_len;
  data.val_fraction = 0;
  return data;
}

}  // namespace

TEST_CASE("nanoGPT shard: windows of T+1 tokens, y shifted by one", "[data][unit]") {
  DataDir dir;
  write_nanogpt(dir / "train.bin", iota_tokens(21));
  TokenDataset ds(open_token_files(dir / "train.bin", TokenFormat::nanogpt, "data.path"), 4);
  CHECK(ds.stream().size() == 21);
  CHECK(ds.size() == 5);  // (21 - 1) / 4
  Batch b = ds.get({0, 2, 4});
  CHECK(b.x.sizes() == at::IntArrayRef({3, 4}));
  CHECK(b.x.scalar_type() == at::kLong);
  CHECK(b.y.scalar_type() == at::kLong);
  CHECK(to_vector(b.x) == std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19});
  CHECK(to_vector(b.y) == std::vector<int64_t>{1, 2, 3, 4, 9, 10, 11, 12, 17, 18, 19, 20});
}

TEST_CASE("token dataset with an end-of-text token: position ids restart after it", "[data][unit]") {
  DataDir dir;
  // Documents of 3, 5 and 4 tokens, each closed by token 0; the rest counts up.
  write_nanogpt(dir / "train.bin", {5, 6, 0, 7, 8, 9, 10, 0, 11, 12, 13, 0, 14});
  TokenDataset ds(open_token_files(dir / "train.bin", TokenFormat::nanogpt, "data.path"), 6, 0);
  Batch b = ds.get({0, 1});
  REQUIRE(b.position_ids.defined());
  CHECK_FALSE(b.attention_mask.defined());
  // Window 0: 5 6 0 | 7 8 9; window 1 starts mid-document at 0: 10 0 | 11 12 13 0.
  CHECK(to_vector(b.position_ids) == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 0, 1, 2, 3});
  TokenDataset plain(open_token_files(dir / "train.bin", TokenFormat::nanogpt, "data.path"), 6);
  CHECK_FALSE(plain.get({0}).position_ids.defined());
}

TEST_CASE("llm.c shard: header skipped, detected by its magic", "[data][unit]") {
  DataDir dir;
  std::vector<uint16_t> tokens = iota_tokens(9, 60000);  // also checks uint16 is unsigned
  write_llmc(dir / "a.bin", tokens);
  for (TokenFormat format : {TokenFormat::detect, TokenFormat::llmc}) {
    TokenStream stream = open_token_files(dir / "a.bin", format, "data.path");
    REQUIRE(stream.size() == 9);
    TokenDataset ds(stream, 4);
    CHECK(ds.size() == 2);
    Batch b = ds.get({1});
    CHECK(to_vector(b.x) == std::vector<int64_t>{60004, 60005, 60006, 60007});
    CHECK(to_vector(b.y) == std::vector<int64_t>{60005, 60006, 60007, 60008});
  }
}

TEST_CASE("directory of shards: *.bin sorted by name and concatenated", "[data][unit]") {
  DataDir dir;
  write_nanogpt(dir / "shard_01.bin", iota_tokens(5, 5));   // second by name
  write_llmc(dir / "shard_00.bin", iota_tokens(5, 0));      // first; formats may mix
  write_nanogpt(dir / "shard_02.bin", iota_tokens(3, 10));  // third
  write_bytes(dir / "notes.txt", "not a shard");
  TokenStream stream = open_token_files(dir.str(), TokenFormat::detect, "data.path");
  REQUIRE(stream.shards().size() == 3);
  CHECK(stream.size() == 13);
  std::vector<int64_t> all(13);
  stream.read(0, 13, all.data());
  CHECK(all == range(0, 13));
  TokenDataset ds(stream, 3);
  CHECK(ds.size() == 4);
  Batch b = ds.get({1, 3});  // both windows cross a shard boundary
  CHECK(to_vector(b.x) == std::vector<int64_t>{3, 4, 5, 9, 10, 11});
  CHECK(to_vector(b.y) == std::vector<int64_t>{4, 5, 6, 10, 11, 12});
}

TEST_CASE("make_dataset: the last val_fraction of the samples is val", "[data][unit]") {
  DataDir dir;
  write_nanogpt(dir / "t.bin", iota_tokens(41));  // 10 samples of T = 4
  DataConfig data = tokens_config(dir / "t.bin", 4);
  data.val_fraction = 0.2;
  ModelConfig model;
  auto train = make_dataset(data, model, Split::train, 0);
  auto val = make_dataset(data, model, Split::val, 0);
  CHECK(train->size() == 8);
  CHECK(val->size() == 2);
  CHECK(to_vector(train->get({7}).x) == range(28, 32));
  CHECK(to_vector(val->get({0}).x) == range(32, 36));
  CHECK(to_vector(val->get({1}).y) == range(37, 41));

  SECTION("val_fraction 0: val is empty, train has everything") {
    data.val_fraction = 0;
    CHECK(make_dataset(data, model, Split::train, 0)->size() == 10);
    CHECK(make_dataset(data, model, Split::val, 0)->size() == 0);
  }
  SECTION("val_path: val is that whole file, train the whole path") {
    write_llmc(dir / "v.bin", iota_tokens(9, 100));
    data.val_path = dir / "v.bin";
    CHECK(make_dataset(data, model, Split::train, 0)->size() == 10);
    auto v = make_dataset(data, model, Split::val, 0);
    CHECK(v->size() == 2);
    CHECK(to_vector(v->get({1}).y) == range(105, 109));
  }
  SECTION("seq_len 0 means model.block_size") {
    data.seq_len = 0;
    model.block_size = 5;
    data.val_fraction = 0;
    auto ds = make_dataset(data, model, Split::train, 0);
    CHECK(ds->size() == 8);  // (41 - 1) / 5
    CHECK(ds->get({0}).x.size(1) == 5);
  }
}

TEST_CASE("token dataset: concurrent get calls agree", "[data][unit]") {
  DataDir dir;
  write_nanogpt(dir / "t.bin", iota_tokens(4001));
  TokenDataset ds(open_token_files(dir / "t.bin", TokenFormat::detect, "data.path"), 8);
  std::vector<int64_t> indices = range(0, ds.size());
  std::vector<int64_t> expected = to_vector(ds.get(indices).y);
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) same[size_t(t)] += to_vector(ds.get(indices).y) == expected;
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(same == std::vector<int>(4, 20));
}

TEST_CASE("token_format names", "[data][unit]") {
  CHECK(parse_token_format("auto") == TokenFormat::detect);
  CHECK(parse_token_format("nanogpt") == TokenFormat::nanogpt);
  CHECK(parse_token_format("llmc") == TokenFormat::llmc);
  CHECK(to_string(TokenFormat::detect) == "auto");
}
