// Private to src/io: a checkpoint directory's manifest.json, read and checked, and the checks
// every reader of a listed file makes (checkpoint.cpp, checkpoint_file.cpp).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensor_file.h"

namespace frugal::io::detail {

struct Manifest {
  std::filesystem::path dir;
  std::filesystem::path path;
  nlohmann::json json;

  bool lists_any() const { return json.contains("files") && json["files"].is_object(); }
  bool lists(const std::string& name) const { return lists_any() && json["files"].contains(name); }
  bool sharded() const { return json.contains("sharded"); }
  // Bounded by the files listed, one per rank at least, before anything loops over the
  // ranks: a damaged world_size (2^31) would otherwise make two billion file names.
  int shard_world() const;
  // A listed file's entry (frugal::Error when it is not listed).
  const nlohmann::json& entry(const std::string& name) const;
  // A listed file's bytes, checked against the manifest's size and hash.
  std::string read_checked(const std::string& name) const;
  // The same check, reading the file in pieces (memory bounded by one piece).
  void verify(const std::string& name) const;
  // Only that the file is there, readable, and of the size the manifest says.
  void check_size(const std::string& name) const;
  // A tensor file's index (where each tensor lies, the hash of every block), or none for a
  // file without one: inline in the manifest (model.pt, optimizer.pt), or the file of its own
  // that the entry names (a shard's), read and checked; its bytes are added to `index_bytes`.
  std::optional<TensorFileSummary> block_index(const std::string& name,
                                               int64_t* index_bytes = nullptr) const;
  // The file's size, and blocks [first, last) of it against `index`'s hashes, read in pieces;
  // returns the bytes read.
  int64_t verify_blocks(const std::string& name, const TensorFileSummary& index, int64_t first,
                        int64_t last) const;
  // What a complete checkpoint of this kind holds: optimizer.pt unless sharded (then only
  // when listed), every rank's shard when sharded.
  std::vector<std::string> required_files() const;
};

// The manifest of a checkpoint directory, parsed and its shape checked; a missing directory or
// manifest, or a damaged one, is a frugal::Error naming it.
Manifest read_manifest(const std::filesystem::path& checkpoint_dir);

}  // namespace frugal::io::detail
