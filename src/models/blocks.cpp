#include "frugal/models/blocks.h"

#include <torch/nn/modules/container/modulelist.h>

#include "frugal/util/error.h"

namespace frugal {

std::shared_ptr<torch::nn::Module> module_at(torch::nn::Module& root, const std::string& path) {
  torch::nn::Module* current = &root;
  std::shared_ptr<torch::nn::Module> found;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string name = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const auto children = current->named_children();
    const auto* child = children.find(name);
    if (child == nullptr) return nullptr;
    found = *child;
    current = found.get();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return found;
}

std::string child_names(const torch::nn::Module& m) {
  std::string names;
  for (const auto& item : m.named_children()) names += (names.empty() ? "" : ", ") + item.key();
  return names.empty() ? "none" : names;
}

std::vector<Block> list_blocks(torch::nn::Module& model, const std::vector<std::string>& block_lists,
                               const std::string& who) {
  std::vector<Block> blocks;
  for (const std::string& list_name : block_lists) {
    const auto list_module = module_at(model, list_name);
    if (!list_module) {
      throw Error(who + ": the model has no module list '" + list_name +
                  "' (its children: " + child_names(model) + ")");
    }
    auto list = std::dynamic_pointer_cast<torch::nn::ModuleListImpl>(list_module);
    if (!list) {
      throw Error(who + ": '" + list_name + "' is a " + list_module->name() +
                  ", not a torch::nn::ModuleList of blocks");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      blocks.push_back(Block{list_name + "." + std::to_string(i), list->ptr(i)});
    }
  }
  return blocks;
}

}  // namespace frugal
