// `frugal report RUN [RUN...]`: one self-contained HTML page (inline SVG, one small inline
// script, nothing fetched) comparing runs: loss (log scale, validation loss dashed), learning
// rate, throughput, step time, the step's phase times, memory over the steps, each run in
// its own colour with a legend naming the settings that differ between them; per rank
// charts for distributed runs; a summary table; the resolved configs; and the allocator
// history's timeline when a run recorded it (memory.record_history: the CPU tracker's
// memory_history.json with the training phases under it, or CUDA's memory_snapshot.pickle).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace frugal {

std::string render_report(const std::vector<std::filesystem::path>& run_dirs);
std::string render_report(const std::filesystem::path& run_dir);

}  // namespace frugal
