#include "replay_state.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace frugal::detail {
namespace {

at::Tensor get_state(const at::Generator& gen) {
  // Generators are shared process-wide; their own mutex guards state reads and writes.
  at::Generator g = gen;
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_state(const at::Generator& gen, const at::Tensor& state) {
  at::Generator g = gen;
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

const at::Generator& cpu_generator() {
  return at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CPU));
}

}  // namespace

RngState capture_rng(const c10::Device& device) {
  RngState s;
  s.cpu = get_state(cpu_generator());
  if (!device.is_cpu()) {
    s.device = device;
    s.device_state = get_state(at::globalContext().defaultGenerator(device));
  }
  return s;
}

void restore_rng(const RngState& s) {
  set_state(cpu_generator(), s.cpu);
  if (s.device) set_state(at::globalContext().defaultGenerator(*s.device), s.device_state);
}

RngReplay::RngReplay(const RngState& replay)
    : before_(capture_rng(replay.device.value_or(c10::Device(c10::DeviceType::CPU)))) {
  restore_rng(replay);
}

RngReplay::~RngReplay() { restore_rng(before_); }

AutocastState capture_autocast() {
  AutocastState s;
  s.cpu_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CPU);
  s.cpu_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  s.cuda_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CUDA);
  s.cuda_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  s.cache_enabled = at::autocast::is_autocast_cache_enabled();
  return s;
}

void AutocastReplay::set(const AutocastState& s) {
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, s.cpu_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CPU, s.cpu_dtype);
  at::autocast::set_autocast_enabled(c10::DeviceType::CUDA, s.cuda_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CUDA, s.cuda_dtype);
  at::autocast::set_autocast_cache_enabled(s.cache_enabled);
}

AutocastReplay::AutocastReplay(const AutocastState& replay)
    : before_(capture_autocast()), nested_(replay.any_enabled()) {
  set(replay);
  if (nested_) at::autocast::increment_nesting();
}

AutocastReplay::~AutocastReplay() {
  if (nested_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set(before_);
}

}  // namespace frugal::detail
