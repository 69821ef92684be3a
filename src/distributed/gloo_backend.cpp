// Gloo's headers come from Debian's libgloo-dev (the torch wheel ships its Gloo compiled into
// libtorch_cpu but not its headers); only types this file passes through by pointer are used.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>

#include "c10d_group.h"

namespace frugal::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const RankInfo& info,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // As torch.distributed does: GLOO_SOCKET_IFNAME picks the interface; otherwise the address
  // this host's name resolves to, or loopback when it resolves to nothing.
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  options->devices.push_back(ifname != nullptr && *ifname != '\0'
                                 ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                 : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, info.rank, info.world_size, options);
}

}  // namespace frugal::dist::detail
