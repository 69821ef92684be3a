// hf::check_architecture: config.json's sizes against the weights' shapes (hf/folder.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "frugal/hf/folder.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::hf {

void check_architecture(const ModelConfig& m, const fs::path& dir) {
  const std::string config = (dir / "config.json").string();
  // Memory-mapped views: only the headers are read here.
  std::map<std::string, std::vector<int64_t>> shapes;
  std::set<int64_t> layers;
  for (const auto& [name, t] : read_weights(dir)) {
    shapes[name] = t.sizes().vec();
    if (name.rfind("layers.", 0) == 0) {
      try {
        layers.insert(std::stoll(name.substr(7)));
      } catch (const std::exception&) {
        throw Error(fmt::format("{}: tensor '{}' has no layer number", dir.string(), name));
      }
    }
  }
  auto fail = [&](const char* key, int64_t value, const std::string& weights) {
    throw Error(fmt::format("{}: {}: {}, but the weights in {} have {}", config, key, value,
                            dir.string(), weights));
  };
  auto shape = [&](const std::string& name) -> const std::vector<int64_t>& {
    auto it = shapes.find(name);
    if (it == shapes.end()) throw Error(fmt::format("{}: the weights have no '{}'", dir.string(), name));
    return it->second;
  };
  auto describe = [](const std::string& name, const std::vector<int64_t>& s) {
    return fmt::format("{} of {}", name, fmt::join(s, "x"));
  };
  const auto& embed = shape("embed_tokens.weight");
  if (embed.size() != 2 || embed[0] != m.vocab_size) {
    fail("vocab_size", m.vocab_size, describe("embed_tokens.weight", embed));
  }
  if (embed[1] != m.n_embd) fail("hidden_size", m.n_embd, describe("embed_tokens.weight", embed));
  const int64_t n_layers = static_cast<int64_t>(layers.size());
  if (n_layers != m.n_layer || (n_layers > 0 && *layers.rbegin() != n_layers - 1)) {
    fail("num_hidden_layers", m.n_layer,
         fmt::format("{} layer{} (layers.0 to layers.{})", n_layers, n_layers == 1 ? "" : "s",
                     layers.empty() ? -1 : *layers.rbegin()));
  }
  const auto& gate = shape("layers.0.mlp.gate_proj.weight");
  if (gate.size() != 2 || gate[0] != m.intermediate_size) {
    fail("intermediate_size", m.intermediate_size, describe("layers.0.mlp.gate_proj.weight", gate));
  }
  const int64_t kv = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
  const auto& k = shape("layers.0.self_attn.k_proj.weight");
  if (k.size() != 2 || k[0] != kv * (m.n_embd / m.n_head)) {
    fail("num_key_value_heads", kv,
         fmt::format("{} ({} heads of {})", describe("layers.0.self_attn.k_proj.weight", k),
                     k.empty() ? 0 : k[0] / std::max<int64_t>(1, m.n_embd / m.n_head),
                     m.n_embd / m.n_head));
  }
}

}  // namespace frugal::hf
