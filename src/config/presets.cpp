// Named GPT sizes for model.size. A preset only fills defaults: keys written explicitly (in any
// file of the extends chain, or with --set) win, whatever their order (see bind.cpp).
#include "frugal/config/load.h"
#include "internal.h"

namespace frugal::config_detail {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      // name        n_layer n_head n_embd block_size vocab_size
      {"gpt-tiny", 2, 2, 32, 32, 256},
      {"gpt-mini", 4, 4, 128, 128, 256},
      {"gpt-small", 6, 6, 384, 256, 256},
      {"gpt2-124m", 12, 12, 768, 1024, 50304},   // GPT-2 small; vocab 50257 padded to 64s
      {"gpt2-350m", 24, 16, 1024, 1024, 50304},  // GPT-2 medium
  };
  return presets;
}

const GptPreset* find_gpt_preset(std::string_view name) {
  for (const GptPreset& p : gpt_presets())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace frugal::config_detail

namespace frugal {

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : config_detail::gpt_presets()) names.push_back(p.name);
  return names;
}

}  // namespace frugal
