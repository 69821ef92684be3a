// `frugal report RUN_DIR`: one self-contained HTML page (no network, no script; inline SVG)
// with loss, learning rate, throughput and memory over the steps (per rank when the job was
// distributed), a summary table and the resolved config; and, when the run recorded the CUDA
// allocator's history (memory.record_history: true), its timeline of allocated bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace frugal {

std::string render_report(const std::filesystem::path& run_dir);

// The allocator history's timeline from a memory snapshot (the pickle PyTorch's memory viewer
// reads): (time in microseconds, bytes allocated) after each alloc / free of device 0's trace.
std::vector<std::pair<double, double>> allocation_timeline(const std::string& snapshot_pickle);

}  // namespace frugal
