// `--set section.key=value` overrides. The value is YAML (so lists and maps work), merged over
// the document by the same rule as `extends:`, and checked later like any other key; errors
// point at "--set section.key" since there is no file position.
#include <fmt/format.h>

#include <algorithm>

#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t") - first + 1));
}

std::vector<std::string> split_dots(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(key.substr(start, dot - start));
  parts.push_back(key.substr(start));
  return parts;
}

// The first n parts, dotted.
std::string join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "." : "") + parts[i];
  return out;
}

void apply_override(Entry& root, const std::string& text) {
  const auto eq = text.find('=');
  const std::string key = trim(std::string_view(text).substr(0, eq));
  const Loc loc{"--set " + (eq == std::string::npos ? text : key)};
  const auto parts = split_dots(key);
  const bool empty_part =
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  if (eq == std::string::npos && text.find(':') != std::string::npos)
    fail(loc, fmt::format("expected section.key=value, got '{}' (--set takes '=' where YAML "
                          "writes ':', e.g. --set optim.lr=1e-3)",
                          text));
  if (eq == std::string::npos || empty_part)
    fail(loc, "expected section.key=value (e.g. --set optim.lr=1e-3)");

  const std::string value = text.substr(eq + 1);
  // "Q: hello" is a map to YAML (or an error, "Q: a? A:"); for a key that is not a section (a
  // prompt, a name) the user meant the text. A map or list written as one ({a: 1}) stays YAML.
  const std::string first = trim(value);
  const bool text_with_colon = value.find(": ") != std::string::npos && !first.starts_with('{') &&
                               !first.starts_with('[') && !schema_children(key);
  const YAML::Node node = [&] {
    if (text_with_colon) return YAML::Node(value);
    try {
      return YAML::Load(value);
    } catch (const YAML::Exception& e) {
      fail(loc, fmt::format("cannot read the value '{}' as YAML: {}", value, e.msg));
    }
  }();

  // Wrap the value in one map per dotted part, then merge like a child file.
  Entry entry = to_entry(node, parts.back(), key, loc, loc.file);
  relocate(entry, loc);
  for (size_t i = parts.size() - 1; i > 0; --i) {
    Entry parent = map_entry(parts[i - 1], join(parts, i), loc);
    parent.children.push_back(std::move(entry));
    entry = std::move(parent);
  }
  Entry top = map_entry("", "", loc);
  top.children.push_back(std::move(entry));
  expand_shorthands(top);
  merge_into(root, std::move(top));
}

}  // namespace

void apply_overrides(Entry& root, const std::vector<std::string>& overrides) {
  for (const std::string& text : overrides) apply_override(root, text);
}

}  // namespace frugal::config_detail
