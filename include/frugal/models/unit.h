// A Unit is a block of a model that strategies may wrap: activation checkpointing recomputes
// it in backward, sharding gathers its parameters around it. The model stays unaware of them:
// it calls unit->forward(x), which runs forward_impl(x) through whatever wrappers strategies
// installed at setup.
//
// A unit may read more tensors than its input: `extras` (an attention mask, rotary angles for
// position ids) ride along unchanged through every wrapper to forward_impl(x, extras).
// Wrappers see only x; the extras are held by the inner function, so a checkpoint's recompute
// in backward reads the same ones, and sharding gathers parameters around the call as usual.
//
// Wrappers nest by layer, not by installation order: a wrapper with a higher layer runs
// outside one with a lower layer, and among equal layers the one installed last runs outside.
// frugal's own layers put checkpointing inside sharding, so the recompute in backward runs
// after sharding has gathered the parameters again, whichever strategy was applied first.
//
// Derive your own blocks from frugal::Unit (implement forward_impl) to make them checkpointable
// and shardable; parameter names are untouched (a Unit is a plain torch::nn::Module).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

namespace frugal {

// Tensors a unit reads besides its input; undefined entries are allowed (absent options).
using UnitExtras = std::vector<at::Tensor>;

// The computation a wrapper wraps: the unit itself or the wrappers inside this one.
using UnitFn = std::function<at::Tensor(const at::Tensor& x)>;
// Runs `inner(x)` in some way (e.g. checkpoint(inner, x)) and returns its result.
using UnitWrapper = std::function<at::Tensor(const at::Tensor& x, const UnitFn& inner)>;

// Layers of frugal's wrappers, innermost first.
namespace wrap_layer {
inline constexpr int kCheckpoint = 100;  // recompute in backward
inline constexpr int kShard = 200;       // gather parameters before, free after
}  // namespace wrap_layer

class Unit : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;

  // forward_impl(x, extras) through the installed wrappers, outermost first.
  at::Tensor forward(const at::Tensor& x, const UnitExtras& extras = {});

  // Installs `wrapper` as `name`. A wrapper of the same name is replaced (its slot moves to
  // the new layer), so a strategy applied twice wraps once.
  void set_wrapper(const std::string& name, int layer, UnitWrapper wrapper);
  // Returns whether a wrapper of that name was installed.
  bool remove_wrapper(const std::string& name);
  bool has_wrapper(const std::string& name) const;
  void clear_wrappers();
  // Outermost first.
  std::vector<std::string> wrapper_names() const;

 protected:
  // The unit's own computation, unwrapped. Override this one for units of one input, or
  // forward_impl_extras for units that read extras (its default calls this one and refuses
  // extras).
  virtual at::Tensor forward_impl(const at::Tensor& x);
  virtual at::Tensor forward_impl_extras(const at::Tensor& x, const UnitExtras& extras);

 private:
  // Runs wrappers_[i] with the rest of the chain as its inner function.
  at::Tensor run_from(size_t i, const at::Tensor& x, const UnitExtras& extras);

  struct Entry {
    std::string name;
    int layer = 0;
    UnitWrapper wrap;
  };
  std::vector<Entry> wrappers_;  // outermost first
};

}  // namespace frugal
