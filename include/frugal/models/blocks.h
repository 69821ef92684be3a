// A model's blocks: the elements of its named module lists (Model::block_lists(), e.g.
// {"blocks"}; dotted paths such as "encoder.layers" work too). Checkpointing wraps them;
// sharding groups their parameters into units.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace frugal {

struct Block {
  std::string path;  // "blocks.3"
  std::shared_ptr<torch::nn::Module> module;
};

// The module at a dotted path below `root`, or null.
std::shared_ptr<torch::nn::Module> module_at(torch::nn::Module& root, const std::string& path);
// "a, b, c": the names of m's children ("none" without any), for error messages.
std::string child_names(const torch::nn::Module& m);
// Every element of every list, in order. A missing list, or one that is not a
// torch::nn::ModuleList, is a frugal::Error starting with `who` (e.g. "checkpointing").
std::vector<Block> list_blocks(torch::nn::Module& model, const std::vector<std::string>& block_lists,
                               const std::string& who);

}  // namespace frugal
