#include "frugal/train/metrics.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/io/atomic_file.h"
#include "frugal/util/error.h"

namespace frugal {

MetricsLog::MetricsLog(const std::filesystem::path& path, int64_t keep_up_to_step) : path_(path) {
  if (keep_up_to_step >= 0 && std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::ostringstream kept;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) continue;  // a line torn by a crash
      if (j.value("step", int64_t{0}) <= keep_up_to_step) kept << line << '\n';
    }
    io::write_file_atomic(path, kept.str());
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) {
    throw Error(fmt::format("cannot open '{}' for writing: {}", path.string(), std::strerror(errno)));
  }
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::string& line) {
  std::fputs(line.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

}  // namespace frugal
