// frugal's tokenizer against the `tokenizers` package (tests/python/tokenizer_reference.py):
// byte-level BPE tokenizers trained locally in four styles (GPT-2's regex; Llama 3's Split
// pattern with ignore_merges; Qwen2's pattern with single digits; Digits + ByteLevel with a
// prefix space) encode a corpus of more than 1 MB with non-ASCII text in many scripts,
// emoji, digits, tabs and CRLF to exactly the same ids, documents joined by an added token;
// decoding gives the text back.
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frugal/data/token_stream.h"
#include "frugal/data/tokenizer.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

TEST_CASE("byte-level BPE ids equal the tokenizers package's on 1 MB of mixed text",
          "[integration][python][tokenizer]") {
  test::TempDir dir("frugal-tokenizer");
  auto r = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/tokenizer_reference.py").string()) + " " +
      test::quote(dir.path().string()) + " /usr/share/games/fortunes");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string text = test::read_text(dir / "corpus.txt");
  REQUIRE(text.size() >= 1000000);  // the issue asks for 1 MB at least
  std::vector<std::string> docs;
  for (size_t at = 0;;) {
    const size_t next = text.find("\n\n", at);
    docs.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 2;
  }
  // One loop, not SECTIONs: each SECTION would run the Python side again.
  for (const std::string style : {"gpt2", "llama3", "qwen2", "digits"}) {
    {
      INFO(style);
      auto tok = Tokenizer::load(dir / style);
      const auto eot = tok->token_id("<|endoftext|>");
      REQUIRE(eot);
      std::vector<int64_t> ids;
      for (const std::string& doc : docs) {
        auto part = tok->encode(doc);
        ids.insert(ids.end(), part.begin(), part.end());
        ids.push_back(*eot);
      }
      const std::string raw = test::read_text(dir / style / "ids.bin");
      std::vector<int32_t> expected(raw.size() / 4);
      std::memcpy(expected.data(), raw.data(), raw.size());
      REQUIRE(ids.size() == expected.size());
      size_t first_diff = ids.size();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] != expected[i]) {
          first_diff = i;
          break;
        }
      }
      INFO("first difference at token " << first_diff);
      CHECK(first_diff == ids.size());
      std::cout << style << ": " << ids.size() << " tokens of " << text.size()
                << " bytes, all equal\n";
      // Decoding gives each document back (but where the pre-tokenizer adds a prefix space
      // to every piece, as `tokenizers` does too).
      if (style != "digits") {
        CHECK(tok->decode(tok->encode(docs[3])) == docs[3]);
        CHECK(tok->decode(tok->encode(docs.back())) == docs.back());
      }
    }
  }
  CHECK_THROWS_WITH(Tokenizer::load(dir.path())->encode("x"), Catch::Contains("no tokenizer.json"));

  // prepare-text: two documents, each ended by <|endoftext|>; uint16 for this vocabulary, and
  // llm.c's uint32 shards once an added token's id passes 65535.
  test::write_text(dir / "docs" / "a.txt", docs[1]);
  test::write_text(dir / "docs" / "b.txt", docs[2]);
  auto gpt2 = Tokenizer::load(dir / "gpt2");
  std::vector<int64_t> expected = gpt2->encode(docs[1]);
  expected.push_back(*gpt2->token_id("<|endoftext|>"));
  for (int64_t id : gpt2->encode(docs[2])) expected.push_back(id);
  expected.push_back(*gpt2->token_id("<|endoftext|>"));
  auto big = nlohmann::json::parse(test::read_text(dir / "gpt2" / "tokenizer.json"));
  big["added_tokens"].push_back({{"id", 70000}, {"content", "<|big|>"}, {"single_word", false},
                                 {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                 {"special", true}});
  test::write_text(dir / "big" / "tokenizer.json", big.dump());
  for (const std::string name : {"gpt2", "big"}) {
    INFO(name);
    const auto out = dir / (name + ".bin");
    auto p = test::run_command(test::frugal_binary() + " prepare-text " +
                               test::quote((dir / "docs").string()) + " --tokenizer " +
                               test::quote((dir / name).string()) + " -o " + test::quote(out.string()));
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 0);
    TokenStream stream = open_token_files(out.string(), TokenFormat::detect, "data.path");
    CHECK(stream.shards().front().width == (name == "big" ? 4 : 2));
    std::vector<int64_t> got(static_cast<size_t>(stream.size()));
    stream.read(0, stream.size(), got.data());
    CHECK(got == expected);
  }
}
