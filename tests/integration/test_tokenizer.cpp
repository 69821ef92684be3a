// frugal's tokenizers against the Python packages, on a corpus of more than 1 MB with
// non-ASCII text in many scripts, decomposed accents, emoji, digits, tabs and CRLF:
// - tokenizer.json (tests/python/tokenizer_reference.py, the `tokenizers` package): byte-level
//   BPE trained locally in five styles (GPT-2's regex; Llama 3's Split pattern with
//   ignore_merges; Qwen2's pattern with single digits; Digits + ByteLevel with a prefix space;
//   Qwen2.5's NFC normalizer), the NFC one under NFD, NFKD and a Sequence of NFD and NFKC, and
//   with added tokens matched before and after the normalizer, encode it to exactly the same
//   ids, documents joined by an added token; decoding gives the text back.
// - SentencePiece .model files (tests/python/sentencepiece_reference.py, the `sentencepiece`
//   package): BPE with byte fallback and unigram models give the same ids and decoded text.
// - prepare-text ends each document with the end-of-text token, for both kinds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frugal/data/token_stream.h"
#include "frugal/data/tokenizer.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

namespace {

// An ids.bin the reference scripts wrote (int32, little-endian).
std::vector<int64_t> read_reference_ids(const std::filesystem::path& path) {
  const std::string raw = test::read_text(path);
  std::vector<int32_t> narrow(raw.size() / 4);
  std::memcpy(narrow.data(), raw.data(), raw.size());
  return {narrow.begin(), narrow.end()};
}

// The index of the first id that differs, or the common length when none does.
size_t first_differing_token(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return i;
  }
  return n;
}

// The reference scripts' documents: the corpus split at blank lines, as Python's split("\n\n").
std::vector<std::string> reference_documents(const std::string& text) {
  std::vector<std::string> docs;
  for (size_t at = 0;;) {
    const size_t next = text.find("\n\n", at);
    docs.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 2;
  }
  return docs;
}

// Runs `frugal prepare-text INPUT --tokenizer TOKENIZER -o OUT`.
test::CommandResult run_prepare_text(const std::filesystem::path& input,
                                     const std::filesystem::path& tokenizer,
                                     const std::filesystem::path& out) {
  return test::run_command(test::frugal_binary() + " prepare-text " + test::quote(input.string()) +
                           " --tokenizer " + test::quote(tokenizer.string()) + " -o " +
                           test::quote(out.string()));
}

std::vector<int64_t> read_shard_tokens(const std::filesystem::path& shard) {
  TokenStream stream = open_token_files(shard.string(), TokenFormat::detect, "data.path");
  std::vector<int64_t> tokens(static_cast<size_t>(stream.size()));
  stream.read(0, stream.size(), tokens.data());
  return tokens;
}

}  // namespace

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
  const std::vector<std::string> docs = reference_documents(text);
  // One loop, not SECTIONs: each SECTION would run the Python side again.
  for (const std::string style :
       {"gpt2", "llama3", "qwen2", "digits", "nfc", "nfd", "nfkd", "nfkc_sequence", "nfc_added"}) {
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
      const std::vector<int64_t> expected = read_reference_ids(dir / style / "ids.bin");
      INFO("first difference at token " << first_differing_token(ids, expected));
      REQUIRE(ids == expected);
      std::cout << style << ": " << ids.size() << " tokens of " << text.size()
                << " bytes, all equal\n";
      // Decoding gives each document back (but where the pre-tokenizer adds a prefix space
      // to every piece, as `tokenizers` does too, and where a normalizer changed the text).
      if (style != "digits") CHECK(tok->decode(tok->encode(docs[3])) == docs[3]);
      if (style == "gpt2" || style == "llama3" || style == "qwen2") {
        CHECK(tok->decode(tok->encode(docs.back())) == docs.back());
      }
    }
  }
  // nfc_added's tokens occur in the corpus: café in both spellings (matched after NFC), sté
  // with U+0301 (matched before it).
  const std::vector<int64_t> with_added = read_reference_ids(dir / "nfc_added" / "ids.bin");
  const auto cafe = std::count(with_added.begin(), with_added.end(), 3000);
  const auto ste = std::count(with_added.begin(), with_added.end(), 3001);
  std::cout << "nfc_added: cafe " << cafe << " times, ste " << ste << " times\n";
  CHECK(cafe > 0);
  CHECK(ste > 0);
  // Canonically equivalent spellings get the same ids under NFC, not without a normalizer.
  const std::string decomposed = "cafe\xCC\x81 A\xCC\x8Angstro\xCC\x88m";  // e + U+0301, ...
  const std::string composed = "caf\xC3\xA9 \xC3\x85ngstr\xC3\xB6m";       // U+00E9, ...
  auto nfc = Tokenizer::load(dir / "nfc"), qwen2 = Tokenizer::load(dir / "qwen2");
  CHECK(nfc->encode(decomposed) == nfc->encode(composed));
  CHECK(qwen2->encode(decomposed) != qwen2->encode(composed));
  // A normalizer frugal does not have is an error naming the file and the field.
  auto lowercase = nlohmann::json::parse(test::read_text(dir / "nfc" / "tokenizer.json"));
  lowercase["normalizer"] = {{"type", "Sequence"},
                             {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  test::write_text(dir / "lowercase" / "tokenizer.json", lowercase.dump());
  CHECK_THROWS_WITH(Tokenizer::load(dir / "lowercase"),
                    Catch::Contains("lowercase/tokenizer.json: normalizer.normalizers[1]: type "
                                    "'Lowercase' is not supported"));
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
    auto p = run_prepare_text(dir / "docs", dir / name, out);
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 0);
    // One line, with what the training config needs next: the end-of-text id.
    CHECK(p.out == fmt::format("prepare-text: wrote {} tokens ({}-bit, vocabulary {}, end of text "
                               "{}) to '{}' (llmc)\n",
                               expected.size(), name == "big" ? 32 : 16,
                               name == "big" ? 70001 : gpt2->vocab_size(),
                               *gpt2->token_id("<|endoftext|>"), out.string()));
    TokenStream stream = open_token_files(out.string(), TokenFormat::detect, "data.path");
    CHECK(stream.shards().front().width == (name == "big" ? 4 : 2));
    CHECK(read_shard_tokens(out) == expected);
  }
}

TEST_CASE("SentencePiece tokenizers: ids and text equal the sentencepiece package's on 1 MB",
          "[integration][python][tokenizer]") {
  test::TempDir dir("frugal-sentencepiece");
  const auto python_start = std::chrono::steady_clock::now();
  auto r = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/sentencepiece_reference.py").string()) + " " +
      test::quote(dir.path().string()) + " /usr/share/games/fortunes");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::cout
      << "sentencepiece reference: " << r.out << "  ("
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - python_start).count()
      << " s)\n";
  const std::string text = test::read_text(dir / "corpus.txt");
  REQUIRE(text.size() >= 1000000);
  const std::vector<std::string> docs = reference_documents(text);

  // bpe: Llama 2's settings (byte fallback); unigram: T5's (nmt_nfkc, <unk>). Loaded from the
  // folder, and from the file.
  for (const std::string style : {"bpe", "unigram"}) {
    INFO(style);
    auto tok = Tokenizer::load(dir / style);
    REQUIRE(Tokenizer::load(dir / style / "tokenizer.model")->vocab_size() == 3000);
    CHECK(tok->vocab_size() == 3000);
    // SentencePiece's defaults: <unk> 0, <s> 1, </s> 2; token_id knows every piece.
    CHECK(tok->end_of_text_id() == 2);
    CHECK(tok->token_id("</s>") == 2);
    CHECK(tok->token_id("<unk>") == 0);
    CHECK_FALSE(tok->token_id("no such piece"));
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> ids;
    for (const std::string& doc : docs) {
      const auto part = tok->encode(doc);
      ids.insert(ids.end(), part.begin(), part.end());
      ids.push_back(*tok->end_of_text_id());
    }
    const double encode_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<int64_t> expected = read_reference_ids(dir / style / "ids.bin");
    INFO("first difference at token " << first_differing_token(ids, expected));
    REQUIRE(ids == expected);
    // decode(encode(doc)) is the package's decoding, document by document.
    const auto decoded = nlohmann::json::parse(test::read_text(dir / style / "decoded.json"));
    REQUIRE(decoded.size() == docs.size());
    size_t same_text = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      const std::string mine = tok->decode(tok->encode(docs[i]));
      INFO("document " << i);
      REQUIRE(mine == decoded[i].get<std::string>());
      same_text += mine == docs[i];
    }
    std::cout << "sentencepiece " << style << ": " << ids.size() << " tokens of " << text.size()
              << " bytes, all equal (encode " << encode_s << " s); " << docs.size()
              << " documents decoded as the package does, " << same_text << " of them to the "
              << "original text\n";
    // Llama 2's settings give every document back; nmt_nfkc and <unk> do not.
    if (style == "bpe") CHECK(same_text == docs.size());
    CHECK_THROWS_WITH(tok->decode({3000}), Catch::Contains("no token has id 3000"));
  }

  // A folder with a tokenizer.json beside the .model takes the tokenizer.json, as transformers'
  // fast tokenizers do; a folder with another *.model name (T5's spiece.model) is found too.
  test::write_text(dir / "both" / "tokenizer.json",
                   R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                       "pre_tokenizer": {"type": "ByteLevel"}})");
  std::filesystem::copy_file(dir / "bpe" / "tokenizer.model", dir / "both" / "tokenizer.model");
  CHECK(Tokenizer::load(dir / "both")->vocab_size() == 1);
  // ... unless frugal cannot run it, as Llama 2's (converted from its tokenizer.model with
  // normalizers frugal's BPE lacks): then the tokenizer.model.
  auto llama2 = nlohmann::json::parse(test::read_text(dir / "both" / "tokenizer.json"));
  llama2["normalizer"] = {{"type", "Sequence"},
                          {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}}}};
  test::write_text(dir / "both" / "tokenizer.json", llama2.dump());
  CHECK(Tokenizer::load(dir / "both")->encode(docs[1]) ==
        Tokenizer::load(dir / "bpe")->encode(docs[1]));
  CHECK_THROWS_WITH(Tokenizer::load(dir / "both" / "tokenizer.json"), Catch::Contains("'Prepend'"));
  std::filesystem::create_directories(dir / "t5");
  std::filesystem::copy_file(dir / "unigram" / "tokenizer.model", dir / "t5" / "spiece.model");
  CHECK(Tokenizer::load(dir / "t5")->encode(docs[1]) ==
        Tokenizer::load(dir / "unigram")->encode(docs[1]));
  std::filesystem::copy_file(dir / "bpe" / "tokenizer.model", dir / "t5" / "other.model");
  CHECK_THROWS_WITH(Tokenizer::load(dir / "t5"), Catch::Contains("2 SentencePiece *.model files"));
  std::filesystem::create_directories(dir / "empty");
  CHECK_THROWS_WITH(Tokenizer::load(dir / "empty"),
                    Catch::Contains("empty: no tokenizer.json and no SentencePiece *.model file"));

  // prepare-text: each document's ids, then </s>, as the package's ids say.
  const std::vector<int64_t> reference = read_reference_ids(dir / "bpe" / "ids.bin");
  std::vector<std::vector<int64_t>> reference_by_doc(1);
  for (int64_t id : reference) {
    reference_by_doc.back().push_back(id);
    if (id == 2) reference_by_doc.emplace_back();
  }
  reference_by_doc.pop_back();  // the empty one after the last </s>
  REQUIRE(reference_by_doc.size() == docs.size());
  // docs[1] and the longest document (non-ASCII lines among fortunes).
  const size_t last =
      static_cast<size_t>(std::max_element(docs.begin(), docs.end(),
                                           [](const std::string& a, const std::string& b) {
                                             return a.size() < b.size();
                                           }) -
                          docs.begin());
  test::write_text(dir / "docs" / "a.txt", docs[1]);
  test::write_text(dir / "docs" / "b.txt", docs[last]);
  std::vector<int64_t> expected = reference_by_doc[1];
  expected.insert(expected.end(), reference_by_doc[last].begin(), reference_by_doc[last].end());
  auto p = run_prepare_text(dir / "docs", dir / "bpe", dir / "bpe.bin");
  INFO(p.out << p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(read_shard_tokens(dir / "bpe.bin") == expected);
  std::cout << "prepare-text (sentencepiece bpe): " << expected.size() << " tokens equal\n";

  // A model without an EOS piece cannot end the documents: an error, not a shard.
  p = run_prepare_text(dir / "docs", dir / "no_eos", dir / "no_eos.bin");
  CHECK(p.exit_code == 2);
  CHECK_THAT(p.err, Catch::Contains("no_eos' has no end-of-text token"));
  CHECK_FALSE(std::filesystem::exists(dir / "no_eos.bin"));

  // A corrupt model (cut short, as by an interrupted download) is one line naming the file.
  const std::string model = test::read_text(dir / "bpe" / "tokenizer.model");
  test::write_text(dir / "cut" / "tokenizer.model", model.substr(0, model.size() / 3));
  p = run_prepare_text(dir / "docs", dir / "cut", dir / "cut.bin");
  CHECK(p.exit_code == 2);
  CHECK_THAT(p.err, Catch::Contains("cut/tokenizer.model: not a valid SentencePiece model"));
  CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "cut.bin"));
}
