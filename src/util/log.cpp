// The only file that includes spdlog; built in an object library without torch's include
// folder (see cmake/FrugalTorch.cmake for why).
#include "frugal/util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>

namespace frugal::log {
namespace {

struct State {
  State() {
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    console->set_pattern("%^[%L]%$ %v");
    logger = std::make_shared<spdlog::logger>("frugal", console);
    logger->set_level(spdlog::level::info);
    logger->flush_on(spdlog::level::info);
  }
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  std::string prefix;
};

// A function-local static: initialised once, thread-safely, on first use.
State& state() {
  static State s;
  return s;
}

void emit(spdlog::level::level_enum level, std::string_view message) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.prefix.empty()) {
    s.logger->log(level, message);
  } else {
    s.logger->log(level, "{}{}", s.prefix, message);
  }
}

}  // namespace

void debug(std::string_view m) { emit(spdlog::level::debug, m); }
void info(std::string_view m) { emit(spdlog::level::info, m); }
void warn(std::string_view m) { emit(spdlog::level::warn, m); }
void error(std::string_view m) { emit(spdlog::level::err, m); }

void set_level(Level level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info,
                                                  spdlog::level::warn, spdlog::level::err,
                                                  spdlog::level::off};
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.logger->set_level(map[static_cast<int>(level)]);
}

void add_file(const std::string& path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  s.logger->sinks().push_back(file);
}

void close_files() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& sinks = s.logger->sinks();
  sinks.resize(1);  // the console sink is always first
}

void set_rank(int rank, int world_size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.prefix = world_size > 1 ? "[rank " + std::to_string(rank) + "] " : "";
}

}  // namespace frugal::log
