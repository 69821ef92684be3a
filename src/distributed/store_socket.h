// Private to src/distributed. The socket rank 0's c10d TCPStore serves on. Left to itself,
// torch's TCPStore listens on the port on every interface of the machine, whatever
// MASTER_ADDR says; frugal binds it to MASTER_ADDR's address instead and hands torch the
// socket (TCPStoreOptions::masterListenFd), so the rendezvous is reachable only where the job
// said it would be (docs/security.md).
#pragma once

#include <optional>
#include <string>

namespace frugal::dist::detail {

// A socket bound to addr:port and listening, when addr is a numeric address of this machine.
// nullopt for a host name (`numeric` false) or a numeric address this machine does not have
// (behind NAT; `numeric` true): then torch listens on every interface. Any other failure (the
// port in use) is a frugal::Error.
std::optional<int> listen_for_store(const std::string& addr, int port, bool& numeric);

}  // namespace frugal::dist::detail
