// Where a job's rendezvous listens (docs/security.md): under `frugal launch` (MASTER_ADDR
// 127.0.0.1) rank 0's c10d store must listen on loopback only. torch's TCPStore on its own
// listens on every interface ("*:PORT", an IPv6 socket that takes IPv4 too); frugal hands it a
// socket bound to the numeric MASTER_ADDR.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sstream>

#include "support/cli.h"
#include "support/helpers.h"
#include "support/model_configs.h"

namespace store_bind {

TEST_CASE("frugal launch's store listens on MASTER_ADDR (loopback) only",
          "[integration][security][multiproc]") {
  frugal::test::TempDir dir("frugal-store-bind");
  const int port = frugal::test::free_port();
  const std::string hex_port = fmt::format(":{:04X} ", port);
  // A job long enough to be seen; the sockets listening on the port (state 0A in
  // /proc/net/tcp{,6}) are read while it runs, then the job is stopped.
  const std::string job =
      frugal::test::quote(frugal::test::frugal_binary()) +
      fmt::format(" launch --nproc-per-node 2 --master-port {} -- train", port) +
      " --set run.dir=" + frugal::test::quote(dir.path().string()) + " " +
      frugal::test::transformer_sets("gpt", 1, 2, 16, 8, 32) + " --set data.type=synthetic"
      " --set strategy.sharding.mode=ddp --set train.max_steps=100000"
      " --set train.checkpoint_every=0 --set train.eval_batches=0 --set train.progress=none"
      " --set generate.tokens=0 --set distributed.timeout_s=30 >/dev/null 2>&1";
  const std::string script =
      job + " & job=$!; for i in $(seq 150); do"
            "  found=$(grep -h '" + hex_port + "[0-9A-F:]* 0A ' /proc/net/tcp /proc/net/tcp6);"
            "  [ -n \"$found\" ] && break; sleep 0.1; done;"
            " printf '%s\\n' \"$found\"; kill $job; wait $job; true";
  auto r = frugal::test::run_command(script, 60);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> local;  // each listener's local address
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, address;
    if (fields >> slot >> address) local.push_back(address);
  }
  // 127.0.0.1 as /proc/net/tcp writes it (little-endian hex), and nothing else.
  CHECK(local == std::vector<std::string>{fmt::format("0100007F:{:04X}", port)});
}

}  // namespace store_bind
