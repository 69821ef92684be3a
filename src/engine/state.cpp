#include "frugal/engine/state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

#include <map>
#include <sstream>

#include "frugal/util/error.h"

namespace frugal {

NamedTensors module_state(const torch::nn::Module& module, const std::set<std::string>& skip) {
  NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (skip.count(p.key()) != 0) continue;
    out.emplace_back(p.key(), p.value().detach().cpu().contiguous().clone());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    out.emplace_back(b.key(), b.value().detach().cpu().contiguous().clone());
  }
  return out;
}

void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what, const std::set<std::string>& skip) {
  std::map<std::string, at::Tensor> given(state.begin(), state.end());
  torch::NoGradGuard no_grad;
  auto copy_in = [&](const std::string& name, at::Tensor& dst) {
    auto it = given.find(name);
    if (it == given.end()) throw Error(fmt::format("{}: missing tensor '{}'", what, name));
    const at::Tensor& src = it->second;
    if (src.sizes() != dst.sizes() || src.scalar_type() != dst.scalar_type()) {
      throw Error(fmt::format("{}: tensor '{}' has shape {} {}, the model expects {} {}", what,
                              name, fmt::join(src.sizes(), "x"), c10::toString(src.scalar_type()),
                              fmt::join(dst.sizes(), "x"), c10::toString(dst.scalar_type())));
    }
    dst.copy_(src);
    given.erase(it);
  };
  for (auto& p : module.named_parameters(true)) {
    if (skip.count(p.key()) == 0) copy_in(p.key(), p.value());
  }
  for (auto& b : module.named_buffers(true)) copy_in(b.key(), b.value());
  if (!given.empty()) {
    throw Error(fmt::format("{}: unexpected tensor '{}' (not in the model)", what,
                            given.begin()->first));
  }
}

std::string optimizer_state(torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes,
                          const std::string& what) {
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(bytes);
    // State tensors go where the parameters are (a CPU-saved state resumes on CUDA).
    c10::optional<c10::Device> device;
    for (const auto& group : optimizer.param_groups()) {
      if (!group.params().empty()) {
        device = group.params().front().device();
        break;
      }
    }
    archive.load_from(in, device);
    optimizer.load(archive);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}: cannot restore the optimizer state ({})", what,
                            e.what_without_backtrace()));
  }
}

NamedTensors rng_state() {
  NamedTensors out;
  out.emplace_back("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
  if (at::globalContext().hasCUDA()) {
    const auto n = at::detail::getCUDAHooks().deviceCount();
    for (c10::DeviceIndex d = 0; d < n; ++d) {
      out.emplace_back(fmt::format("rng.cuda.{}", d),
                       at::globalContext().defaultGenerator(at::Device(at::kCUDA, d)).get_state());
    }
  }
  return out;
}

void load_rng_state(const NamedTensors& state) {
  for (const auto& [name, t] : state) {
    if (name == "rng.cpu") {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // shares the global state
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(t);
    } else if (name.rfind("rng.cuda.", 0) == 0 && at::globalContext().hasCUDA()) {
      const auto d = static_cast<c10::DeviceIndex>(std::stoi(name.substr(9)));
      if (d < at::detail::getCUDAHooks().deviceCount()) {
        at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, d));
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(t);
      }
    }
  }
}

}  // namespace frugal
