#include "frugal/train/step_profiler.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace fs = std::filesystem;
namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

namespace frugal {

StepProfiler::StepProfiler(const ProfileConfig& cfg, const fs::path& run_dir, c10::Device device,
                           int rank, int world_size)
    : cfg_(cfg), device_(device) {
  path_ = run_dir / "profile" /
          (rank == 0 || world_size == 1 ? std::string("trace.json")
                                        : fmt::format("trace.rank{}.json", rank));
}

StepProfiler::~StepProfiler() {
  if (active_) {
    try {
      (void)kineto::disableProfiler();
    } catch (...) {
    }
  }
}

void StepProfiler::before_step(int64_t step) {
  if (cfg_.start_step <= 0 || active_ || done_ || step != cfg_.start_step) return;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device_.is_cuda()) activities.insert(ActivityType::CUDA);
  // Kineto looks for GPUs as it starts and, on a machine without one, logs "gpuGetDeviceCount
  // failed" to the console and into the trace: noise where no GPU was asked for. Its own level
  // variable, read when it starts, quiets it (a level the user set is kept).
  if (!device_.is_cuda() && !at::globalContext().hasCUDA()) {
    setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  }
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/cfg_.shapes,
                              /*profile_memory=*/cfg_.memory);
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  active_ = true;
}

void StepProfiler::after_step(int64_t step) {
  if (active_ && step >= cfg_.start_step + cfg_.steps - 1) save();
}

void StepProfiler::finish() {
  if (active_) save();
}

void StepProfiler::name_trace(const fs::path& partial) const {
  // Kineto names the trace after the file it wrote (traceName), the temporary one: the viewers
  // show that name, so it becomes the final one.
  std::string text;
  {
    std::ifstream in(partial, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string written = "\"traceName\": " + nlohmann::json(partial.string()).dump();
  const size_t at = text.find(written);
  if (at == std::string::npos) return;
  text.replace(at, written.size(), "\"traceName\": " + nlohmann::json(path_.string()).dump());
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw Error(fmt::format("train.profile: cannot write '{}'", partial.string()));
}

void StepProfiler::save() {
  active_ = false;
  done_ = true;
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  std::error_code ec;
  fs::create_directories(path_.parent_path(), ec);
  if (ec) {
    throw Error(fmt::format("train.profile: cannot create '{}': {}",
                            path_.parent_path().string(), ec.message()));
  }
  // Kineto writes the file itself; a temporary name keeps a reader from seeing half of it.
  const fs::path partial = path_.string() + ".partial";
  result->save(partial.string());
  name_trace(partial);
  fs::rename(partial, path_, ec);
  if (ec) {
    throw Error(fmt::format("train.profile: cannot write '{}': {}", path_.string(), ec.message()));
  }
  log::info(fmt::format("profile of steps {}..{}: {}", cfg_.start_step,
                        cfg_.start_step + cfg_.steps - 1, path_.string()));
}

}  // namespace frugal
