// The merged-document tree: conversion from yaml-cpp, merging, and describing values in errors.
#include <fmt/format.h>

#include <charconv>

#include "frugal/util/error.h"
#include "internal.h"

namespace frugal::config_detail {

Loc at(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return Loc{file};
  return Loc{file, mark.line + 1, mark.column + 1};
}

void fail(const Loc& loc, const std::string& message) {
  throw Error(located(loc.file, loc.line, loc.column, message));
}

const Entry* Entry::find(std::string_view name) const {
  for (const Entry& child : children)
    if (child.key == name) return &child;
  return nullptr;
}

const YAML::Node& Entry::value() const {
  static const YAML::Node none(YAML::NodeType::Null);
  return node ? *node : none;
}

Entry* Entry::find(std::string_view name) {
  return const_cast<Entry*>(std::as_const(*this).find(name));
}

const Entry* Entry::find_path(std::string_view dotted_path) const {
  const Entry* entry = this;
  while (entry) {
    const size_t dot = dotted_path.find('.');
    entry = entry->find(dotted_path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    dotted_path.remove_prefix(dot + 1);
  }
  return entry;
}

Loc item_loc(const Entry& e, size_t i) {
  return e.loc.line > 0 ? at(e.loc.file, e.value()[i].Mark()) : e.loc;
}

Entry map_entry(const std::string& key, const std::string& path, const Loc& loc) {
  Entry entry;
  entry.key = key;
  entry.path = path;
  entry.loc = loc;
  entry.is_map = true;
  return entry;
}

Entry leaf_entry(const std::string& key, const std::string& path, const Loc& loc,
                 const YAML::Node& node) {
  Entry entry = map_entry(key, path, loc);
  entry.is_map = false;
  entry.node = std::make_shared<const YAML::Node>(node);
  return entry;
}

Entry to_entry(const YAML::Node& node, const std::string& key, const std::string& path,
               const Loc& loc, const std::string& file) {
  if (!node.IsMap()) return leaf_entry(key, path, loc, node);
  Entry entry = map_entry(key, path, loc);
  for (auto it = node.begin(); it != node.end(); ++it) {
    const Loc key_loc = at(file, it->first.Mark());
    if (!it->first.IsScalar())
      fail(key_loc, fmt::format("keys must be plain names, got {}", describe(it->first)));
    const std::string name = it->first.Scalar();
    const std::string child_path = path.empty() ? name : path + "." + name;
    // yaml-cpp keeps both copies of a repeated key and silently reads the first.
    if (const Entry* first = entry.find(name))
      fail(key_loc,
           fmt::format("duplicate key '{}' (first given at line {})", child_path, first->loc.line));
    entry.children.push_back(to_entry(it->second, name, child_path, key_loc, file));
  }
  return entry;
}

void relocate(Entry& entry, const Loc& loc) {
  entry.loc = loc;
  for (Entry& child : entry.children) relocate(child, loc);
}

void merge_into(Entry& base, Entry over) {
  if (base.is_map && !over.is_map && over.value().IsNull()) return;
  if (!base.is_map || !over.is_map) {
    base = std::move(over);
    return;
  }
  base.loc = over.loc;
  for (Entry& child : over.children) {
    if (Entry* existing = base.find(child.key))
      merge_into(*existing, std::move(child));
    else
      base.children.push_back(std::move(child));
  }
}

namespace {

bool looks_numeric(const std::string& s) {
  double d = 0;
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [end, ec] = std::from_chars(begin, s.data() + s.size(), d);
  return ec == std::errc() && end == s.data() + s.size() && begin != end;
}

}  // namespace

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return node.size() == 0 ? "an empty list" : fmt::format("a list of {}", node.size());
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  if (looks_numeric(s) || s == "true" || s == "false") return s;
  // Errors are one line: escape line breaks and cut long text.
  std::string shown;
  for (char ch : s.substr(0, 60)) shown += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  if (s.size() > 60) shown += "...";
  return "'" + shown + "'";
}

}  // namespace frugal::config_detail
