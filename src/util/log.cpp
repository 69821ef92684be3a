// The only file that includes spdlog; built in an object library without torch's include
// folder (see cmake/FrugalTorch.cmake for why).
//
// debug/info go to stdout and warnings/errors to stderr, so a failing command's stderr holds
// just its problem (the CLI's error is one line there), while the run's narrative is on stdout.
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
    auto out_sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
    auto err_sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    out_sink->set_pattern("%v");
    err_sink->set_pattern("%^%l:%$ %v");
    out = std::make_shared<spdlog::logger>("frugal", out_sink);
    err = std::make_shared<spdlog::logger>("frugal-err", err_sink);
    for (auto& l : {out, err}) {
      l->set_level(spdlog::level::info);
      l->flush_on(spdlog::level::debug);
    }
  }
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> out;  // debug, info
  std::shared_ptr<spdlog::logger> err;  // warn, error
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
  auto& logger = level >= spdlog::level::warn ? s.err : s.out;
  if (s.prefix.empty()) {
    logger->log(level, message);
  } else {
    logger->log(level, "{}{}", s.prefix, message);
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
  s.out->set_level(map[static_cast<int>(level)]);
  s.err->set_level(map[static_cast<int>(level)]);
}

void add_file(const std::string& path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  s.out->sinks().push_back(file);
  s.err->sinks().push_back(file);
}

void close_files() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.out->sinks().resize(1);  // the console sink is always first
  s.err->sinks().resize(1);
}

void set_rank(int rank, int world_size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.prefix = world_size > 1 ? "[rank " + std::to_string(rank) + "] " : "";
}

std::string rank_prefix() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.prefix;
}

}  // namespace frugal::log
