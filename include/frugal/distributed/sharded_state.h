// What a sharded checkpoint holds, independent of any process group: the layout of the flat
// buffers (which parameters, in what order, where), each rank's shards of the parameters and
// of their optimizer state, and the way back to whole tensors by parameter name. Loading at
// another world size (or under another zero mode or wrap policy) goes through whole tensors:
// every parameter's elements keep their value, whatever shard they land in.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "frugal/io/named_tensors.h"

namespace frugal::dist {

struct FlatLayout {
  std::string name;                          // "blocks.0/group0"
  int64_t numel = 0;                         // unpadded
  std::vector<std::string> names;            // parameters, in order
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;

  int64_t shard_numel(int world) const { return (numel + world - 1) / world; }
  bool operator==(const FlatLayout& o) const {
    return name == o.name && numel == o.numel && names == o.names && shapes == o.shapes &&
           offsets == o.offsets;
  }
};

struct ShardLayout {
  std::string mode;     // zero1 | zero2 | zero3 | hsdp
  int world_size = 1;   // ranks the flats are cut over (hsdp: one shard group's)
  // hsdp: groups holding the same shards. Only the first writes them; every rank of every
  // group writes its own random generators, so a checkpoint has world_size x replicas files.
  int replicas = 1;
  std::vector<FlatLayout> flats;
};

std::string layout_to_json(const ShardLayout& layout);
// `what` names the file in errors.
ShardLayout layout_from_json(const std::string& json, const std::string& what);

// The name of a flat buffer's `kind` in a shard file: "<flat>/<kind>"; kinds are "param" and
// the optimizer's (optim/param_state.h).
std::string shard_key(const std::string& flat, const std::string& kind);

}  // namespace frugal::dist
