// Scenarios of frugal_dist_worker that live in their own files (worker.cpp dispatches).
#pragma once

namespace frugal::test_worker {

int masked();  // masked.cpp

}  // namespace frugal::test_worker
