// Scenarios of frugal_dist_worker that live in their own files (worker.cpp dispatches).
#pragma once

#include <string>

namespace frugal::test_worker {

int masked();                                                        // masked.cpp
int checkpoint_io(const std::string& what, const std::string& dir);  // checkpoint_io.cpp

}  // namespace frugal::test_worker
