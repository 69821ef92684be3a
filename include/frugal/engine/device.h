// Where a run computes: run.device in YAML, resolved against what this process can see.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace frugal {

// "auto" -> the first CUDA device when CUDA is available, else the CPU; "cpu"; "cuda" (device
// 0); "cuda:N". Asking for CUDA where there is none, or for a device index past the last, is a
// frugal::Error naming run.device.
// In a multi-process job `auto` and `cuda` mean cuda:LOCAL_RANK (pass it as local_rank).
c10::Device resolve_device(const std::string& spec, int local_rank = 0);

}  // namespace frugal
