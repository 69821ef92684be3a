// The launcher's process supervision as a library call (frugal::dist::launch): ranks started
// with torchrun's environment, their lines prefixed, a failing rank ending the job with its
// code, restarts. The ranks are /bin/sh one-liners; their lines go to a file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

#include "frugal/distributed/launcher.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

namespace test_launcher {

// Runs `script` under /bin/sh in each of `ranks` ranks; returns the exit code and the ranks'
// stdout lines, sorted.
struct Ran {
  int code = 0;
  std::vector<std::string> lines;
  double seconds = 0;
};

Ran run_ranks(int ranks, const std::string& script, int max_restarts = 0) {
  test::TempDir dir("frugal-launcher");
  const std::string out = (dir.path() / "out.txt").string();
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  dist::LaunchOptions o;
  o.nproc_per_node = ranks;
  o.master_port = 0;
  o.max_restarts = max_restarts;
  o.grace_s = 5;
  o.command = {"/bin/sh", "-c", script};
  o.out_fd = fd;
  const auto start = std::chrono::steady_clock::now();
  Ran r;
  r.code = dist::launch(o);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  std::istringstream in(test::read_text(out));
  for (std::string line; std::getline(in, line);) r.lines.push_back(line);
  std::sort(r.lines.begin(), r.lines.end());
  return r;
}

}  // namespace test_launcher

using namespace test_launcher;

TEST_CASE("the launcher library gives each rank torchrun's environment and prefixes its lines",
          "[unit][launch]") {
  const Ran r = run_ranks(3,
                          "echo \"$RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE "
                          "restart $TORCHELASTIC_RESTART_COUNT\"; printf 'no newline'");
  CHECK(r.code == 0);
  REQUIRE(r.lines.size() == 6);
  CHECK(r.lines[0] == "[rank 0] 0/3 local 0/3 restart 0");
  CHECK(r.lines[1] == "[rank 0] no newline");
  CHECK(r.lines[4] == "[rank 2] 2/3 local 2/3 restart 0");
  // One rendezvous port for the whole job.
  const Ran ports = run_ranks(2, "echo $MASTER_ADDR:$MASTER_PORT");
  REQUIRE(ports.lines.size() == 2);
  CHECK(ports.lines[0].substr(9) == ports.lines[1].substr(9));
  CHECK(ports.lines[0].find("127.0.0.1:") != std::string::npos);
}

TEST_CASE("a failing rank ends the job with its code and stops the others", "[unit][launch]") {
  // Rank 1 fails at once; rank 0 would sleep for a minute but is sent SIGTERM.
  const Ran r = run_ranks(2, "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 60");
  CHECK(r.code == 3);
  CHECK(r.seconds < 30);
}

TEST_CASE("launch restarts a failed job and says which attempt it is", "[unit][launch]") {
  // Every rank fails on the first attempt and succeeds on the restart.
  const Ran r = run_ranks(2,
                          "echo attempt $TORCHELASTIC_RESTART_COUNT; "
                          "[ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]",
                          /*max_restarts=*/1);
  CHECK(r.code == 0);
  // The first rank to fail stops the other, which may be stopped before it prints: only the
  // restart's lines are certain, and no rank runs a third time.
  const auto has = [&](const std::string& l) {
    return std::count(r.lines.begin(), r.lines.end(), l);
  };
  CHECK(has("[rank 0] attempt 1") == 1);
  CHECK(has("[rank 1] attempt 1") == 1);
  CHECK(has("[rank 0] attempt 0") + has("[rank 1] attempt 0") >= 1);
  CHECK(r.lines.size() <= 4);
  // Without a restart the first attempt's failure is the job's.
  CHECK(run_ranks(1, "exit 5").code == 5);
}

TEST_CASE("launch refuses what cannot run before starting a rank", "[unit][launch][bad_input]") {
  dist::LaunchOptions o;
  CHECK_THROWS_WITH(dist::launch(o), Catch::Contains("no command"));
  o.command = {"/nonexistent/program"};
  CHECK_THROWS_WITH(dist::launch(o), Catch::Contains("cannot run '/nonexistent/program'"));
  o.command = {"frugal-no-such-program-anywhere"};
  o.frugal_commands = {"train"};
  CHECK_THROWS_WITH(dist::launch(o), Catch::Contains("neither a frugal command (train)"));
  o.command = {"/bin/true"};
  o.nnodes = 2;
  o.node_rank = 2;
  CHECK_THROWS_WITH(dist::launch(o), Catch::Contains("--node-rank must be in [0, --nnodes)"));
}
