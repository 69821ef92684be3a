#include "saved_tensor_hooks.h"

#include <torch/csrc/autograd/engine.h>

#include <mutex>
#include <typeinfo>
#include <vector>

#include "frugal/util/error.h"

namespace frugal::detail {
namespace {

// The scopes alive on this thread, innermost last.
thread_local std::vector<const SavedTensorHooksFactory*> t_scopes;

// LibTorch's autograd engine, plus the default hooks of the innermost scope.
class HookingEngine final : public torch::autograd::Engine {
 public:
  ~HookingEngine() override { stop(); }  // before the base destructor, as the engine asks
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (t_scopes.empty()) return nullptr;
    return (*t_scopes.back())();
  }

  // LibTorch starts the engines' device threads once per process, not once per engine (a
  // function-local static in initialize_device_threads_pool): when another engine ran a
  // backward first, this one would have no device queues and its first CUDA backward would
  // fail an internal assert. Start this engine's own then.
  void start_own_device_threads() {
    initialize_device_threads_pool();  // starts ours when no engine has run yet
    if (device_ready_queues_.empty()) start_device_threads();
  }
};

torch::autograd::Engine& hooking_engine() {
  static HookingEngine engine;
  return engine;
}

void install_hooking_engine() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto& current = torch::autograd::Engine::get_default_engine();
    if (typeid(current) != typeid(torch::autograd::Engine)) {
      throw Error(std::string("activation checkpointing: this process runs another autograd "
                              "engine (") + typeid(current).name() +
                  ", Python's?); frugal's C++ checkpointing needs LibTorch's own");
    }
    static_cast<HookingEngine&>(hooking_engine()).start_own_device_threads();
    torch::autograd::set_default_engine_stub(&hooking_engine);
  });
}

}  // namespace

SavedTensorHooksScope::SavedTensorHooksScope(SavedTensorHooksFactory factory)
    : factory_(std::move(factory)) {
  install_hooking_engine();
  t_scopes.push_back(&factory_);
}

SavedTensorHooksScope::~SavedTensorHooksScope() { t_scopes.pop_back(); }

bool SavedTensorHooksScope::active() { return !t_scopes.empty(); }

}  // namespace frugal::detail
