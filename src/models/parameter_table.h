// torch::nn::Module keeps its parameters in a protected dictionary with no public way to drop
// or replace one: a derived class may name the member, and so reach it in any module.
#pragma once

#include <torch/nn/module.h>

#include <string>

namespace frugal::detail {

struct ParameterTable : torch::nn::Module {
  static void drop(torch::nn::Module& m, const std::string& name) {
    (m.*(&ParameterTable::parameters_)).erase(name);
  }
  // The entry keeps its place: the module's parameter order (the optimizer's, ZeRO's flat
  // layout's) is the one it was built with.
  static void replace(torch::nn::Module& m, const std::string& name, const at::Tensor& value) {
    (m.*(&ParameterTable::parameters_))[name] = value;
  }
};

}  // namespace frugal::detail
