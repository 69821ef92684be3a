// The special token ids an export keeps, so that transformers' generate stops where the model
// learned to (without them it stops on a default id, or never).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "frugal/data/tokenizer.h"
#include "frugal/hf/folder.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"

namespace frugal::hf {
namespace fs = std::filesystem;

namespace {

// Member `key` of a config.json / generation_config.json as the file has it, "" when absent or
// null: a number, or a list (Llama 3.1 ends on any of three).
std::string id_value(const json_input::Node& j, const char* key) {
  const auto e = j.find(key);
  if (!e || e->value().is_null()) return "";
  const nlohmann::json& v = e->value();
  const bool ok = v.is_number_integer() ||
                  (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const auto& x) {
                     return x.is_number_integer();
                   }));
  if (!ok) e->fail("expected a token id or a list of token ids");
  return v.dump();
}

}  // namespace

TokenIds special_token_ids(const fs::path& source_dir, int64_t eot_token) {
  TokenIds ids;
  const fs::path config = source_dir / "config.json";
  if (!source_dir.empty() && fs::exists(config)) {
    const auto doc = json_input::parse_file(config, json_input::kConfigMaxBytes);
    const json_input::Node j(doc, config.string());
    j.object();
    ids.bos = id_value(j, "bos_token_id");
    ids.eos = id_value(j, "eos_token_id");
  }
  if (ids.eos.empty() && !source_dir.empty() && fs::is_directory(source_dir)) {
    // No id in config.json: the folder's tokenizer's end of text, if it has a tokenizer.
    if (has_tokenizer_file(source_dir)) {
      ids.eos = std::to_string(end_of_text_token(*Tokenizer::load(source_dir), source_dir));
    }
  }
  if (ids.eos.empty() && eot_token >= 0) ids.eos = std::to_string(eot_token);  // data.eot_token
  return ids;
}

std::vector<int64_t> stop_token_ids(const fs::path& source_dir, int64_t eot_token) {
  std::string eos;
  const fs::path generation = source_dir / "generation_config.json";
  if (!source_dir.empty() && fs::exists(generation)) {
    const auto doc = json_input::parse_file(generation, json_input::kConfigMaxBytes);
    const json_input::Node j(doc, generation.string());
    j.object();
    eos = id_value(j, "eos_token_id");
  }
  if (eos.empty()) eos = special_token_ids(source_dir, eot_token).eos;
  if (eos.empty()) return {};
  const nlohmann::json v = nlohmann::json::parse(eos);
  if (v.is_array()) return v.get<std::vector<int64_t>>();
  return {v.get<int64_t>()};
}

}  // namespace frugal::hf
