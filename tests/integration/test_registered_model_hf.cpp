// A model type registered from user code with a Hugging Face mapping (ModelSpec::hf) reads and
// writes folders through it as the built-in llama does through its own: config.json by its
// model_type (model.init_from), the config.json and tensor names an export writes, and PEFT's
// names. A type without a mapping is refused by name. (Registrations last for the process, which
// the file's other cases share: each case registers names of its own.)
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "frugal/config/hf_config.h"
#include "frugal/config/load.h"
#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/models/registry.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"
#include "support/helpers.h"

using namespace frugal;

namespace test_registered_model_hf {

void write_config_json(const std::filesystem::path& dir, const nlohmann::json& config) {
  std::filesystem::create_directories(dir);
  test::write_text(dir / "config.json", config.dump(2));
}

}  // namespace test_registered_model_hf

using namespace test_registered_model_hf;

TEST_CASE("a model type registered with a Hugging Face mapping reads and writes folders by it",
          "[integration][models]") {
  test::TempDir dir("frugal-registered-hf");
  // "small-lm" is the llama under another name whose folders say model_type "small_lm": it
  // reads the llama's keys plus one of its own (`depth`, which must be a multiple of 2), and
  // writes its own model_type back.
  ModelSpec spec = *find_model_spec("llama");
  const HfMapping llama = spec.hf;
  spec.hf.model_types = {"small_lm"};
  spec.hf.read_config = [llama](const json_input::Node& c, const std::string&, ModelConfig& m) {
    llama.read_config(c, "llama", m);
    const int64_t depth = c.integer_or("depth", m.n_layer, 2, 64);
    if (depth % 2 != 0) c.at("depth").fail("expected a multiple of 2");
    m.n_layer = depth;
  };
  spec.hf.write_config = [llama](const ModelConfig& m) {
    nlohmann::json c = nlohmann::json::parse(llama.write_config(m));
    c["model_type"] = "small_lm";
    c["architectures"] = {"SmallLmForCausalLM"};
    c["depth"] = m.n_layer;
    return c.dump();
  };
  register_model("small-lm", spec);

  const nlohmann::json config = {{"model_type", "small_lm"},
                                 {"vocab_size", 96},
                                 {"hidden_size", 32},
                                 {"intermediate_size", 64},
                                 {"num_hidden_layers", 3},
                                 {"num_attention_heads", 4},
                                 {"num_key_value_heads", 2},
                                 {"max_position_embeddings", 64},
                                 {"depth", 4}};
  write_config_json(dir / "a", config);
  // config.json picks the type by its model_type, and the type's reader fills the sizes.
  const ModelConfig m = hf::read_model_config(dir / "a");
  CHECK(m.type == "small-lm");
  CHECK(m.n_layer == 4);
  CHECK(m.n_kv_head == 2);
  CHECK(m.vocab_size == 96);
  // model.init_from goes through the same reader.
  const Config cfg = load_config_string(
      fmt::format("model: {{init_from: '{}'}}\n", (dir / "a").string()), "c.yaml");
  CHECK(cfg.model.type == "small-lm");
  CHECK(cfg.model.n_layer == 4);
  // Its reader's own complaint names the file and the key.
  nlohmann::json odd = config;
  odd["depth"] = 5;
  write_config_json(dir / "b", odd);
  CHECK_THROWS_WITH(hf::read_model_config(dir / "b"),
                    Catch::Contains("config.json: depth: expected a multiple of 2"));
  // A model_type no type reads is refused, listing those that are read.
  odd["model_type"] = "gpt_neox";
  write_config_json(dir / "c", odd);
  CHECK_THROWS_WITH(hf::read_model_config(dir / "c"),
                    Catch::Contains("model_type: 'gpt_neox' is not a model_type frugal reads") &&
                        Catch::Contains("small_lm") && Catch::Contains("qwen2"));

  // Writing: its config.json, its tensor names (the llama's), PEFT's names through them.
  const nlohmann::json written = nlohmann::json::parse(hf::model_config_json(m));
  CHECK(written["model_type"] == "small_lm");
  CHECK(written["depth"] == 4);
  CHECK(written["dtype"] == "float32");
  const io::NamedTensors named = hf::to_transformers(
      m, {{"embed_tokens.weight", at::zeros({96, 32})}, {"lm_head.weight", at::zeros({96, 32})}});
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "model.embed_tokens.weight");
  CHECK(named[1].first == "lm_head.weight");
  CHECK(hf::peft_name(m, "layers.0.self_attn.q_proj.lora_A.weight") ==
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");

  // A type without a mapping has no transformers layout, and says so by name.
  ModelConfig mlp;
  mlp.type = "mlp";
  CHECK_THROWS_WITH(hf::model_config_json(mlp), Catch::Contains("model.type mlp"));
  CHECK_THROWS_WITH(hf::to_transformers(mlp, {{"fc.weight", at::zeros({2, 2})}}),
                    Catch::Contains("model.type mlp has no transformers layout"));
}
