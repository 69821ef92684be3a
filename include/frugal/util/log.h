// Logging facade over spdlog. spdlog (Debian, fmt 9) lives in one translation unit that never
// sees torch's bundled fmt 12, so callers format first (fmt::format) and pass a string.
#pragma once

#include <string>
#include <string_view>

namespace frugal::log {

enum class Level { debug, info, warn, error, off };

void debug(std::string_view message);
void info(std::string_view message);
void warn(std::string_view message);
void error(std::string_view message);

void set_level(Level level);
// Also write every message to this file (appending), with timestamps.
void add_file(const std::string& path);
// Drop file sinks added by add_file (e.g. at the end of a run, before the next one).
void close_files();
// Tag messages with the rank in multi-process runs ("[rank 1] ...").
void set_rank(int rank, int world_size);
// That tag ("[rank 1] ", or "" before set_rank or in a single process), for the lines written
// to stderr without the logger: the CLI's error line, a rank's last words on a signal. Under
// torchrun or mpirun, which do not tag their ranks' output, it says which rank wrote them.
std::string rank_prefix();

}  // namespace frugal::log
