#include <catch2/catch.hpp>

#include "frugal/data/dataset.h"
#include "frugal/data/shard_meta.h"
#include "frugal/data/text.h"
#include "frugal/data/token_dataset.h"
#include "support/data_files.h"

using namespace frugal;
using namespace frugal::test::data;

namespace {

std::vector<int64_t> bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()),
          reinterpret_cast<const unsigned char*>(s.data()) + s.size()};
}

std::vector<int64_t> all_tokens(const TokenStream& stream) {
  std::vector<int64_t> out(size_t(stream.size()));
  stream.read(0, stream.size(), out.data());
  return out;
}

}  // namespace

TEST_CASE("text file: one token per byte, same windows as tokens", "[data][unit]") {
  DataDir dir;
  write_bytes(dir / "input.txt", "hello w\xc3\xa9rld!");  // UTF-8 bytes stay bytes
  DataConfig data;
  data.type = "text";
  data.path = dir / "input.txt";
  data.seq_len = 3;
  data.val_fraction = 0;
  auto ds = make_dataset(data, ModelConfig{}, Split::train, 0);
  CHECK(ds->size() == 4);  // 13 bytes: (13 - 1) / 3
  Batch b = ds->get({0, 2});
  CHECK(to_vector(b.x) == bytes("helw\xc3\xa9"));
  CHECK(to_vector(b.y) == bytes("ell\xc3\xa9r"));
}

TEST_CASE("text directory: sorted regular files, binary and .dat/.u8 skipped", "[data][unit]") {
  DataDir dir;
  write_bytes(dir / "b.txt", "world");
  write_bytes(dir / "a.md", "hello ");
  write_bytes(dir / "c.dat", "skipped");
  write_bytes(dir / "d.u8", "skipped");
  write_bytes(dir / ".hidden", "skipped");
  write_bytes(dir / "e.bin", std::string("bin\0ary", 7));
  make_dir(dir / "sub");
  write_bytes(dir / "sub/f.txt", "not recursive");
  CHECK(list_text_files(dir.str(), "data.path") ==
        std::vector<std::string>{dir / "a.md", dir / "b.txt"});
  CHECK(all_tokens(open_text_files(dir.str(), "data.path")) == bytes("hello world"));
}

TEST_CASE("prepare_text: round trip through both shard formats", "[data][unit]") {
  DataDir dir;
  write_bytes(dir / "a.txt", "abc\n");
  make_dir(dir / "more");
  write_bytes(dir / "more/b.txt", "\xff z");
  const std::vector<int64_t> expected = bytes("abc\n\xff z");
  for (TokenFormat format : {TokenFormat::nanogpt, TokenFormat::llmc}) {
    std::string out = dir / (std::string(to_string(format)) + ".bin");
    CHECK(prepare_text({dir / "a.txt", dir / "more"}, out, format) == 7);
    CHECK(file_size(out) == (format == TokenFormat::llmc ? 1024 : 0) + 14);
    // Read back with detection: the llm.c header must be recognized, nanoGPT must not be.
    TokenStream stream = open_token_files(out, TokenFormat::detect, "data.path");
    CHECK(all_tokens(stream) == expected);

    // An existing output is kept unless overwrite is asked for.
    write_bytes(dir / "a.txt", "xyz");
    CHECK_THAT(error_message([&] { prepare_text({dir / "a.txt"}, out, format); }),
               Catch::Contains("already exists; refusing to overwrite"));
    CHECK(all_tokens(open_token_files(out, TokenFormat::detect, "data.path")) == expected);
    CHECK(prepare_text({dir / "a.txt"}, out, format, /*overwrite=*/true) == 3);
    CHECK(all_tokens(open_token_files(out, format, "data.path")) == bytes("xyz"));
    write_bytes(dir / "a.txt", "abc\n");
  }
  // Nothing but the inputs and the outputs: the temporary files were renamed away.
  CHECK(count_entries(dir.str()) == 6);  // a.txt, more/, nanogpt.bin(.json), llmc.bin(.json)
  // Each shard's meta file: byte tokens, the overwritten shard's count.
  const auto meta = read_shard_tokenizer(
      open_token_files(dir / "llmc.bin", TokenFormat::detect, "data.path"), "data.path");
  REQUIRE(meta);
  CHECK(meta->hash == "bytes");
  CHECK(meta->vocab_size == 256);
  CHECK(!meta->eot_token);
}
