// The schema's view of the merged tree, before any value is typed: shorthands expanded, and
// every section (at any depth) a map holding only the names the schema lists for it.
#include <fmt/format.h>

#include <algorithm>

#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

// A name the schema knows elsewhere, for a key written at the wrong level ("strategy.init_scale"
// -> "strategy.grad_scaler.init_scale"): the full path when exactly one place has that name.
std::string elsewhere(std::string_view name) {
  std::string found;
  for (const auto& [path, names] : schema_maps()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    if (!found.empty()) return "";  // ambiguous (model.type, optim.type, ...): say nothing
    found = dotted(path, name);
  }
  return found.empty() ? "" : " (did you mean '" + found + "'?)";
}

// For an unknown key or section: a close sibling (a typo), else another trainer's name for a
// key ("learning_rate" -> "optim.lr"), else the same name at another level.
std::string suggestion(std::string_view name, const std::vector<std::string>& siblings) {
  const std::string close = did_you_mean(name, siblings);
  if (!close.empty()) return close;
  if (const std::string* alias = alias_of(name)) return " (did you mean '" + *alias + "'?)";
  return elsewhere(name);
}

// `entry` is the section at entry.path, known to the schema.
void check_section(const Entry& entry) {
  if (!entry.is_map) {
    if (entry.value().IsNull()) return;  // `optim:` alone: nothing to set
    const auto shorthand = schema_shorthands().find(entry.path);
    const std::string alternative =
        shorthand == schema_shorthands().end() ? "" : " or a " + shorthand->second + " name";
    fail(entry.loc, fmt::format("section '{}' must be a map of keys{}, got {}", entry.path,
                                alternative, describe(entry.value())));
  }
  const std::vector<std::string>& names = *schema_children(entry.path);
  for (const Entry& child : entry.children) {
    if (std::find(names.begin(), names.end(), child.key) == names.end())
      fail(child.loc,
           fmt::format("unknown key '{}'{}", child.path, suggestion(child.key, names)));
    // Keys are typed by bind; only sub-sections are walked further.
    if (schema_children(child.path)) check_section(child);
  }
}

}  // namespace

void expand_shorthands(Entry& entry) {
  if (entry.is_map) {
    for (Entry& child : entry.children) expand_shorthands(child);
    return;
  }
  const auto shorthand = schema_shorthands().find(entry.path);
  if (shorthand == schema_shorthands().end() || !entry.value().IsScalar()) return;
  Entry map = map_entry(entry.key, entry.path, entry.loc);
  map.children.push_back(leaf_entry(shorthand->second, dotted(entry.path, shorthand->second),
                                    entry.loc, entry.value()));
  entry = std::move(map);
}

void check_shape(const Entry& root) {
  const std::vector<std::string>& sections = *schema_children("");
  for (const Entry& section : root.children) {
    if (std::find(sections.begin(), sections.end(), section.key) == sections.end())
      fail(section.loc, fmt::format("unknown section '{}'{}", section.key,
                                    suggestion(section.key, sections)));
    check_section(section);
  }
}

}  // namespace frugal::config_detail
