// NCCL's process group comes from libfrugal_cuda.so (src/cuda/cuda_runtime.h): libfrugal itself
// does not link NCCL.
#include "c10d_group.h"
#include "cuda/cuda_runtime.h"

namespace frugal::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const RankInfo& info,
                                                    std::chrono::milliseconds timeout) {
  return cuda::runtime().nccl_backend(store, info.rank, info.world_size, info.local_rank, timeout);
}

}  // namespace frugal::dist::detail
