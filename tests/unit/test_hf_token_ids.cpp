// An export's special token ids (hf::special_token_ids): from the source folder's config.json
// as they are there (a number or a list), else data.eot_token; a malformed id is refused
// naming the file and the key.
#include <catch2/catch.hpp>

#include "frugal/hf/folder.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

TEST_CASE("an export keeps the source's bos and eos ids or else data.eot_token", "[unit][hf]") {
  test::TempDir dir("frugal-token-ids");
  test::write_text(dir / "config.json", R"({"bos_token_id": 128000, "eos_token_id": [128001, 128009]})");
  hf::TokenIds ids = hf::special_token_ids(dir.path(), 50256);
  CHECK(ids.bos == "128000");
  CHECK(ids.eos == "[128001,128009]");
  // No ids there (and no tokenizer): data.eot_token, when the run has one.
  test::write_text(dir / "config.json", R"({"eos_token_id": null})");
  ids = hf::special_token_ids(dir.path(), 50256);
  CHECK(ids.bos.empty());
  CHECK(ids.eos == "50256");
  CHECK(hf::special_token_ids(dir.path(), -1).eos.empty());
  CHECK(hf::special_token_ids({}, 7).eos == "7");  // a run without a source folder
  test::write_text(dir / "config.json", R"({"eos_token_id": "</s>"})");
  CHECK_THROWS_WITH(hf::special_token_ids(dir.path(), -1),
                    Catch::Contains("config.json") && Catch::Contains("eos_token_id") &&
                        Catch::Contains("expected a token id or a list of token ids"));
}
