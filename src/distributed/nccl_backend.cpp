#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "c10d_group.h"

namespace frugal::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const RankInfo& info,
                                                    std::chrono::milliseconds timeout) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(info.local_rank));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, info.rank, info.world_size, options);
}

}  // namespace frugal::dist::detail
