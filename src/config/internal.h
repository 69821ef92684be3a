// Internals shared by the files of src/config (never installed). The pipeline keeps a small
// tree of the merged YAML (Entry) instead of yaml-cpp nodes, because after `extends:` and
// `--set` merge, each key must still know which file, line and column it came from.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/config/load.h"

namespace frugal::config_detail {

// Where a key was written: a position in a file (1-based), or "--set key" with line 0.
struct Loc {
  std::string file;
  int line = 0;
  int column = 0;
};

Loc at(const std::string& file, const YAML::Mark& mark);  // yaml-cpp marks are 0-based
[[noreturn]] void fail(const Loc& loc, const std::string& message);

// A node of the merged document: a map of named children (document order), or a leaf holding
// a yaml-cpp scalar, sequence or null.
struct Entry {
  std::string key;   // its name in the parent map
  std::string path;  // dotted from the root ("optim.lr"); "" for the root
  Loc loc;           // where the key was written
  bool is_map = false;
  std::vector<Entry> children;
  // A leaf's node, held by pointer: YAML::Node's assignment writes through to the node it
  // refers to (every other handle on it sees the change), so Entries, which are moved and
  // merged, must never assign one. A pointer rebinds instead.
  std::shared_ptr<const YAML::Node> node;

  const YAML::Node& value() const;  // a null node when there is none
  const Entry* find(std::string_view name) const;
  Entry* find(std::string_view name);
  // The entry at a dotted path below this one ("strategy.grad_scaler.init_scale"), or null.
  const Entry* find_path(std::string_view dotted_path) const;
};

Entry map_entry(const std::string& key, const std::string& path, const Loc& loc);
Entry leaf_entry(const std::string& key, const std::string& path, const Loc& loc,
                 const YAML::Node& node);

// Converts a parsed document; `file` names it in locations. Duplicate keys are errors.
Entry to_entry(const YAML::Node& node, const std::string& key, const std::string& path,
               const Loc& loc, const std::string& file);
// Points every location of the subtree at `loc` (used for --set values).
void relocate(Entry& entry, const Loc& loc);
// `over` wins key by key; maps merge recursively; a null never erases a map.
void merge_into(Entry& base, Entry over);
// "a list", "a map", "nothing", a number as written, or a quoted string.
std::string describe(const YAML::Node& node);
// Where item i of a sequence leaf was written (the leaf's own place for --set values).
Loc item_loc(const Entry& e, size_t i);

// shape.cpp, the schema's view of the tree. expand_shorthands runs on each document and each
// --set before they merge, so `checkpointing: full` over a parent's map merges like
// `{policy: full}`; check_shape refuses unknown sections and keys at any depth.
void expand_shorthands(Entry& entry);
void check_shape(const Entry& root);

// yaml_reader.cpp: the document with its `extends:` chain merged (parents first).
Entry read_config_file(const std::string& path);
Entry read_config_text(const std::string& text, const std::string& source_name);

// overrides.cpp: "a.b=value" strings merged over the document.
void apply_overrides(Entry& root, const std::vector<std::string>& overrides);

// Where each dotted key of the final config came from, for errors found after typing.
using KeyMarks = std::map<std::string, Loc>;

// bind.cpp: the typed Config (unknown sections/keys and wrong types are errors).
Config bind(const Entry& root, const std::string& source, KeyMarks& marks);

// A byte count that YAML may also spell with a unit ("512MiB", "1.5GB"); it wraps the int64_t
// field so the schema can say so (T is int64_t or const int64_t).
template <class T>
struct Bytes {
  T& value;
};
template <class T>
Bytes<T> byte_count(T& value) {
  return Bytes<T>{value};
}

// scalars.cpp: typed reads of a leaf; `name` is the dotted key used in messages.
void decode(const Entry& e, std::string& out);
void decode(const Entry& e, int64_t& out);
void decode(const Entry& e, uint64_t& out);
void decode(const Entry& e, double& out);
void decode(const Entry& e, bool& out);
void decode(const Entry& e, std::vector<int64_t>& out);
void decode(const Entry& e, std::vector<std::string>& out);
void decode(const Entry& e, Bytes<int64_t> out);
void decode(const Entry& e, MemoryAmount& out);
void decode(const Entry& e, OptimizerPlace& out);
void decode(const Entry& e, std::array<double, 2>& out);
void decode(const Entry& e, std::map<std::string, std::string>& out);

// validate.cpp: `marks` (may be null) locates the offending key.
void validate(const Config& config, const KeyMarks* marks);

// keys_read.cpp: whether a run of `config` reads `section.key` (the other model types' sizes
// and the other data types' source keys it does not).
// dump.cpp: config_keys (load.h).
std::vector<KeyInfo> describe_keys(const std::string& model_type);

// The model.* keys every type has (model.type and fine-tuning's keys), as opposed to those a
// type's spec lists as its own (ModelSpec::keys).
bool model_key_is_common(std::string_view key);
bool key_is_read(const Config& config, std::string_view section, std::string_view key);

// dump.cpp: the fields `keep(section, key)` accepts, as ("section.key", YAML scalar) in
// schema order (what dump() writes, flat: for comparing two configs field by field).
std::vector<std::pair<std::string, std::string>> dump_fields(
    const Config& config, const std::function<bool(std::string_view, std::string_view)>& keep);

// dump.cpp: the YAML text of the fields `keep(section, key)` accepts (section dotted).
std::string dump(const Config& config,
                 const std::function<bool(std::string_view, std::string_view)>& keep);

// suggest.cpp: " (did you mean 'x'?)" when a candidate is close to `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
// Edits (insert, delete, substitute, swap of neighbours) between a and b, case-insensitive.
size_t edit_distance(std::string_view a, std::string_view b);
// frugal's key ("optim.lr") for another trainer's name of it ("learning_rate"), or null.
const std::string* alias_of(std::string_view name);

}  // namespace frugal::config_detail
