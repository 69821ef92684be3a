// A Hugging Face folder's config.json (model.init_from): the bounded read, the JSON types and
// ranges of every field, the relations between them, rope_parameters / rope_scaling. A config
// that reads must also write back (what `export --format hf` writes) and read again the same.
#include <filesystem>

#include "frugal/config/hf_config.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(hf_config) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::filesystem::path dir = frugal::fuzz::scratch_dir() + "/hf";
    std::filesystem::create_directories(dir);
    frugal::fuzz::write_bytes((dir / "config.json").string(), frugal::fuzz::as_text(data, size));
    const frugal::ModelConfig model = frugal::hf::read_model_config(dir);
    frugal::fuzz::write_bytes((dir / "config.json").string(),
                              frugal::hf::model_config_json(model));
    frugal::hf::read_model_config(dir);
  });
}
