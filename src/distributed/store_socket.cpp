#include "store_socket.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "frugal/util/error.h"

namespace frugal::dist::detail {

std::optional<int> listen_for_store(const std::string& addr, int port, bool& numeric) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;  // no lookup: names are torch's to serve
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &found);
  numeric = rc == 0;
  if (rc == EAI_NONAME) return std::nullopt;
  if (rc != 0) {
    throw Error(fmt::format("distributed: MASTER_ADDR '{}': {}", addr, ::gai_strerror(rc)));
  }
  int last_error = EADDRNOTAVAIL;
  std::optional<int> listening;
  for (addrinfo* a = found; a != nullptr && !listening; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    // As torch does for its own socket: a restarted job may rebind while the old connections
    // linger in TIME_WAIT.
    const int on = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listening = fd;
    } else {
      last_error = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listening || last_error == EADDRNOTAVAIL) return listening;
  throw Error(fmt::format("distributed: rank 0 cannot serve the store on {}:{}: {}", addr, port,
                          std::strerror(last_error)));
}

}  // namespace frugal::dist::detail
