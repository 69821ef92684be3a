// metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a
// crashed run keeps what it logged. On resume the lines past the resumed step are dropped
// first, so the file always describes one consistent history.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace frugal {

class MetricsLog {
 public:
  // Opens (appending) path; with keep_up_to_step >= 0, first drops lines whose "step" is
  // greater than it.
  MetricsLog(const std::filesystem::path& path, int64_t keep_up_to_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const std::string& json_object_line);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace frugal
