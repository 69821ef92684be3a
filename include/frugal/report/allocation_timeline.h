// The allocator history's timeline from a memory snapshot (the pickle PyTorch's memory viewer
// reads): (time in microseconds, bytes allocated) after each alloc / free of device 0's trace.
// The report's memory charts read it (report_run.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace frugal {

std::vector<std::pair<double, double>> allocation_timeline(const std::string& snapshot_pickle);

}  // namespace frugal
