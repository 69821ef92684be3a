// A C interface to the tracking CPU allocator, so that a Python process using the same torch
// libraries can install the very same counter (ctypes.CDLL("libfrugal.so")) and the
// benchmarks compare frugal and Python PyTorch with one ruler.
#include <cstdint>

#include "frugal/memory/cpu_tracking.h"

extern "C" {

void frugal_install_cpu_tracking() { frugal::memory::install_cpu_tracking(); }
int64_t frugal_cpu_current_bytes() { return frugal::memory::cpu_counters().current_bytes; }
int64_t frugal_cpu_peak_bytes() { return frugal::memory::cpu_counters().peak_bytes; }
void frugal_reset_cpu_peak() { frugal::memory::reset_cpu_peak(); }

}  // extern "C"
