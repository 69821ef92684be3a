// TensorBoardWriter on its own (include/frugal/train/tensorboard.h): the CRC-32C of the record
// framing against the standard check value, and a file TensorBoard reads back with every value
// as written; a writer resuming from a step drops the events past it, also from a file whose
// last record a crash tore.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <fstream>

#include "frugal/train/tensorboard.h"
#include "support/tensorboard.h"

using namespace frugal;

TEST_CASE("tensorboard: CRC-32C check value and TFRecord's mask", "[unit][tensorboard]") {
  // The check value of CRC-32C (Castagnoli), RFC 3720's polynomial.
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  const uint32_t c = 0xE3069283u;
  CHECK(masked_crc32c("123456789") == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("tensorboard: the writer's scalars, text and histograms read back by TensorBoard",
          "[unit][tensorboard][python]") {
  test::TempDir dir("frugal-tb-writer");
  {
    TensorBoardWriter w(dir.path());
    CHECK(w.file().parent_path() == dir.path());
    CHECK(w.file().filename().string().rfind("events.out.tfevents.", 0) == 0);
    w.add_scalar("loss", 2.5, 1);
    w.add_scalars({{"loss", 1.25}, {"lr", 1e-3}}, 2);
    w.add_text("notes", "hello *world*", 1);
    w.add_histogram("h", at::arange(10, at::kFloat), 2, 5);
    w.add_histogram("flat", at::full({4}, 3.0), 2);
  }
  const auto tb = test::read_tensorboard(dir.path());
  INFO(tb.dump());
  CHECK(tb["raw"]["versions"] == nlohmann::json::array({"brain.Event:2"}));
  CHECK(tb["scalars"]["loss"] == nlohmann::json::parse("[[1, 2.5], [2, 1.25]]"));
  REQUIRE(tb["scalars"]["lr"].size() == 1);
  CHECK(tb["scalars"]["lr"][0][1].get<double>() == static_cast<double>(1e-3f));
  CHECK(tb["texts"]["notes"] == nlohmann::json::parse(R"([[1, "hello *world*"]])"));
  // [step, num, min, max, sum, sum of bucket counts]
  CHECK(tb["histograms"]["h"] == nlohmann::json::parse("[[2, 10, 0, 9, 45, 10]]"));
  CHECK(tb["histograms"]["flat"] == nlohmann::json::parse("[[2, 4, 3, 3, 12, 4]]"));
}

TEST_CASE("tensorboard: a writer resuming from a step drops the later events",
          "[unit][tensorboard][python]") {
  test::TempDir dir("frugal-tb-trim");
  std::filesystem::path first;
  {
    TensorBoardWriter w(dir.path());
    for (int s = 1; s <= 5; ++s) w.add_scalar("x", s, s);
    first = w.file();
  }
  // A crash mid-record: half of a record at the end.
  {
    std::ofstream torn(first, std::ios::binary | std::ios::app);
    torn << std::string("\x20\0\0\0\0\0\0\0\x01\x02", 10);
  }
  {
    TensorBoardWriter w(dir.path(), "", /*keep_up_to_step=*/3);
    for (int s = 4; s <= 6; ++s) w.add_scalar("x", 10 * s, s);
  }
  const auto tb = test::read_tensorboard(dir.path());
  INFO(tb.dump());
  CHECK(tb["raw"]["steps"]["x"] == nlohmann::json::parse("[1, 2, 3, 4, 5, 6]"));
  CHECK(tb["scalars"]["x"] ==
        nlohmann::json::parse("[[1, 1], [2, 2], [3, 3], [4, 40], [5, 50], [6, 60]]"));
}
