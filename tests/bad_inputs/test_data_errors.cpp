// Every user mistake with data files ends in one frugal::Error line that names the config key,
// the file and what was expected.
#include <catch2/catch.hpp>

#include "frugal/data/dataset.h"
#include "frugal/data/text.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

namespace {

struct Fixture {
  DataDir dir;
  DataConfig data;
  ModelConfig model;
  Fixture() {
    data.type = "tokens";
    data.seq_len = 4;
    data.val_fraction = 0;
  }
  // The error make_dataset(train) throws, checked to be a single line.
  std::string error(const std::string& name) {
    data.path = dir / name;
    std::string message = error_message([&] { make_dataset(data, model, Split::train, 0); });
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
};

}  // namespace

using Catch::Contains;

TEST_CASE("bad token shards", "[data][bad_input]") {
  Fixture f;
  SECTION("missing file") {
    CHECK(f.error("none.bin") ==
          "data.path: cannot open '" + (f.dir / "none.bin") + "': No such file or directory");
  }
  SECTION("truncated llm.c shard") {
    write_llmc(f.dir / "t.bin", iota_tokens(8), 20240520, 1, /*count=*/10);
    CHECK_THAT(f.error("t.bin"),
               Contains("t.bin': llm.c header says 10 tokens (1044 bytes) but the "
                        "file has 1040 bytes (truncated?)"));
  }
  SECTION("llm.c header cut short") {
    write_bytes(f.dir / "t.bin", bytes_of(std::vector<int32_t>{20240520, 1, 5}));
    CHECK_THAT(f.error("t.bin"), Contains("shorter than the 1024-byte llm.c header"));
  }
  SECTION("bad magic when the format says llmc") {
    f.data.token_format = "llmc";
    write_llmc(f.dir / "t.bin", iota_tokens(20), /*magic=*/12345);
    CHECK_THAT(f.error("t.bin"),
               Contains("t.bin': bad magic 12345 (expected llm.c magic 20240520 or 20240801)"));
  }
  SECTION("unsupported llm.c version") {
    write_llmc(f.dir / "t.bin", iota_tokens(20), 20240520, /*version=*/2);
    CHECK_THAT(
        f.error("t.bin"),
        Contains("unsupported llm.c version 2 for magic 20240520 (expected 1: uint16 tokens)"));
  }
  SECTION("odd-sized nanoGPT shard") {
    write_bytes(f.dir / "t.bin", bytes_of(iota_tokens(20)) + "x");
    CHECK_THAT(f.error("t.bin"),
               Contains("t.bin': 41 bytes is not a whole number of uint16 tokens"));
  }
  SECTION("token >= vocab_size") {
    std::vector<uint16_t> tokens = iota_tokens(20);
    tokens[13] = 300;
    write_nanogpt(f.dir / "t.bin", tokens);
    CHECK(f.error("t.bin") == "data.path: '" + (f.dir / "t.bin") +
                                  "': token 300 at index 13 is >= model.vocab_size 256");
  }
  SECTION("token >= vocab_size in the second shard of a directory") {
    write_nanogpt(f.dir / "a.bin", iota_tokens(10));
    std::vector<uint16_t> tokens = iota_tokens(10);
    tokens[2] = 256;
    write_llmc(f.dir / "b.bin", tokens);
    f.data.path = f.dir.str();
    CHECK_THAT(error_message([&] { make_dataset(f.data, f.model, Split::train, 0); }),
               Contains("b.bin': token 256 at index 2 is >= model.vocab_size 256"));
  }
  SECTION("too few tokens for one sample") {
    write_nanogpt(f.dir / "t.bin", iota_tokens(4));
    CHECK_THAT(f.error("t.bin"),
               Contains("holds 4 tokens, too few for one sample of data.seq_len 4 (needs 5)"));
  }
  SECTION("too few samples to hold out a val split") {
    write_nanogpt(f.dir / "t.bin", iota_tokens(5));
    f.data.val_fraction = 0.1;
    CHECK_THAT(f.error("t.bin"), Contains("holds 1 samples: too few to hold out"));
  }
  SECTION("directory without shards") {
    make_dir(f.dir / "empty");
    CHECK_THAT(f.error("empty"), Contains("no *.bin shards in directory"));
  }
  SECTION("bad val_path names data.val_path") {
    write_nanogpt(f.dir / "t.bin", iota_tokens(20));
    f.data.path = f.dir / "t.bin";
    f.data.val_path = f.dir / "v.bin";
    CHECK_THAT(error_message([&] { make_dataset(f.data, f.model, Split::val, 0); }),
               Contains("data.val_path: cannot open"));
  }
  SECTION("config values") {
    write_nanogpt(f.dir / "t.bin", iota_tokens(20));
    f.data.token_format = "gpt2";
    CHECK_THAT(f.error("t.bin"), Contains("data.token_format: unknown 'gpt2'"));
    f.data.token_format = "auto";
    f.data.type = "parquet";
    CHECK_THAT(f.error("t.bin"), Contains("data.type: unknown 'parquet'"));
    f.data.type = "tokens";
    f.data.val_fraction = 1;
    CHECK_THAT(f.error("t.bin"), Contains("data.val_fraction must be in [0, 1)"));
  }
}

TEST_CASE("bad text inputs", "[data][bad_input]") {
  Fixture f;
  f.data.type = "text";
  write_bytes(f.dir / "t.bin", std::string("\x01\x00\x02\x00", 4));
  CHECK_THAT(f.error("t.bin"), Contains("t.bin' contains NUL bytes: not a text file"));
  make_dir(f.dir / "d");
  write_bytes(f.dir / "d/x.dat", "skipped");
  CHECK_THAT(f.error("d"), Contains("no text files in directory"));
  CHECK_THAT(error_message(
                 [&] { prepare_text({f.dir / "nope.txt"}, f.dir / "o.bin", TokenFormat::llmc); }),
             Contains("cannot open '" + (f.dir / "nope.txt") + "': No such file or directory"));
  CHECK(!exists(f.dir / "o.bin"));
}

TEST_CASE("bad IDX files", "[data][bad_input]") {
  Fixture f;
  f.data.type = "idx";
  f.model.type = "convnet";
  write_idx_images(f.dir / "train-images-idx3-ubyte", 3, 1, 2, {1, 2, 3, 4, 5, 6});
  SECTION("count mismatch") {
    write_idx_labels(f.dir / "train-labels-idx1-ubyte", {1, 2});
    CHECK_THAT(
        f.error("train-images-idx3-ubyte"),
        Contains("data.labels_path: '" + (f.dir / "train-labels-idx1-ubyte") +
                 "' has 2 labels but '" + (f.dir / "train-images-idx3-ubyte") + "' has 3 images"));
  }
  SECTION("missing labels file") {
    CHECK_THAT(f.error("train-images-idx3-ubyte"),
               Contains("data.labels_path: cannot open '" + (f.dir / "train-labels-idx1-ubyte") +
                        "': No such file or directory"));
  }
  SECTION("labels swapped for images: bad magic") {
    write_idx_labels(f.dir / "labels", {1, 2, 3});
    f.data.labels_path = f.dir / "labels";
    CHECK_THAT(f.error("labels"),
               Contains("bad magic 0x00000801 (expected 0x00000803: IDX images)"));
  }
  SECTION("truncated images") {
    write_idx_images(f.dir / "cut-images", 3, 1, 2, {1, 2, 3, 4, 5});
    write_idx_labels(f.dir / "cut-labels", {1, 2, 3});
    CHECK_THAT(f.error("cut-images"),
               Contains("the IDX header dimensions 3 x 1 x 2 do not match the file's 21 bytes"));
  }
  SECTION("label outside the model's classes") {
    write_idx_labels(f.dir / "train-labels-idx1-ubyte", {1, 10, 3});
    CHECK_THAT(f.error("train-images-idx3-ubyte"),
               Contains("label 10 at index 1 is >= the model's 10 classes"));
  }
  SECTION("no labels path to derive") {
    write_idx_images(f.dir / "pics", 3, 1, 2, {1, 2, 3, 4, 5, 6});
    CHECK_THAT(f.error("pics"), Contains("data.labels_path: not set"));
  }
}
