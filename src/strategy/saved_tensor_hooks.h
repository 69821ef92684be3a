// Saved-tensor hooks for C++: what torch.autograd.graph.saved_tensors_hooks gives Python. While
// a SavedTensorHooksScope is alive on a thread, every tensor autograd saves for backward on
// that thread is handed to hooks made by the scope's factory (pack now, unpack when backward
// needs it) instead of being kept. LibTorch consults the autograd engine for such default
// hooks, and only Python's engine has any; the first scope therefore installs frugal's engine,
// LibTorch's own with this one method added (set_default_engine_stub, as Python does).
#pragma once

#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <functional>
#include <memory>

namespace frugal::detail {

using SavedTensorHooksFactory = std::function<std::unique_ptr<torch::autograd::SavedVariableHooks>()>;

class SavedTensorHooksScope {
 public:
  // Throws frugal::Error when the process already runs another engine (Python's).
  explicit SavedTensorHooksScope(SavedTensorHooksFactory factory);
  ~SavedTensorHooksScope();
  SavedTensorHooksScope(const SavedTensorHooksScope&) = delete;
  SavedTensorHooksScope& operator=(const SavedTensorHooksScope&) = delete;

  // Whether a scope is alive on this thread.
  static bool active();

 private:
  SavedTensorHooksFactory factory_;
};

}  // namespace frugal::detail
