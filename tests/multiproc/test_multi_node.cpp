// Several nodes, as two `frugal launch` processes on this machine over loopback (each a "node"
// of two ranks, meeting at one --master-addr / --master-port), and as two torchrun launches:
// the job trains exactly as one launch of four ranks; launches that disagree on the job's size, a master nobody serves, and
// a rank dying on one node each end every process of the job with one line that says why.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "multiproc/multiproc.h"
#include "support/checkpoint_files.h"
#include "support/model_configs.h"

namespace test_multi_node {

namespace fs = std::filesystem;
using frugal::test::CommandResult;
using frugal::test::quote;
using Clock = std::chrono::steady_clock;

// distributed.timeout_s of every job here, and what ending may take beyond it (the flight
// recorder's wait for dumps, the launchers' grace, start-up on 2 busy cores).
constexpr int kTimeoutS = 10;
constexpr double kGraceS = 30.0;

// A tiny GPT under zero3 on Gloo, four steps, a checkpoint at the last.
std::string train_args(const fs::path& runs, const std::string& name) {
  return "train --set run.dir=" + quote(runs.string()) + " --set run.name=" + name + " " +
         frugal::test::transformer_sets("gpt", 1, 2, 16, 8, 32) +
         " --set data.type=synthetic --set data.synthetic_samples=64"
         " --set data.micro_batch_size=2 --set data.num_workers=0"
         " --set strategy.sharding.mode=zero3 --set distributed.backend=gloo"
         " --set train.max_steps=4 --set train.checkpoint_every=4 --set train.eval_batches=0"
         " --set train.progress=none --set generate.tokens=0 --set distributed.timeout_s=" +
         std::to_string(kTimeoutS);
}

// `frugal launch` as node `node_rank` of `nnodes`, two ranks, meeting at 127.0.0.1:port.
std::string node_launch(int nnodes, int node_rank, int port, const std::string& args,
                        const std::string& env = "") {
  return env + (env.empty() ? "" : " ") + quote(frugal::test::frugal_binary()) +
         " launch --nnodes " + std::to_string(nnodes) + " --node-rank " +
         std::to_string(node_rank) + " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " +
         std::to_string(port) + " --grace 5 -- " + args;
}

// torchrun (from the venv) as node `node_rank` of two, two ranks each, frugal without Python.
std::string torchrun_node(int node_rank, int port, const std::string& args) {
  const fs::path torchrun = fs::path(frugal::test::python()).parent_path() / "torchrun";
  return quote(torchrun.string()) + " --nnodes 2 --node-rank " + std::to_string(node_rank) +
         " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " + std::to_string(port) +
         " --no-python " + quote(frugal::test::frugal_binary()) + " " + args;
}

struct Nodes {
  CommandResult first, second;
  double seconds = 0;  // until both launches ended
};

// Both launches at once (each its own process tree), waited for.
Nodes run_both(const std::string& first, const std::string& second, int timeout_s) {
  const auto start = Clock::now();
  auto other = std::async(std::launch::async,
                          [&] { return frugal::test::run_command(second, timeout_s); });
  Nodes n;
  n.first = frugal::test::run_command(first, timeout_s);
  n.second = other.get();
  n.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return n;
}

}  // namespace test_multi_node

TEST_CASE("two launches of two ranks each train exactly as one launch of four",
          "[multiproc][launch][nodes]") {
  using namespace test_multi_node;
  frugal::test::TempDir dir("frugal-nodes");
  const CommandResult one = frugal::test::launch(4, train_args(dir.path(), "one"), 300);
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  const int port = frugal::test::free_port();
  const Nodes two = run_both(node_launch(2, 0, port, train_args(dir.path(), "two")),
                             node_launch(2, 1, port, train_args(dir.path(), "two")), 300);
  INFO(two.first.out << two.first.err << two.second.out << two.second.err);
  REQUIRE(two.first.exit_code == 0);
  REQUIRE(two.second.exit_code == 0);
  // Node 1's ranks are ranks 2 and 3 of the job: their shards are there.
  CHECK(fs::exists(dir / "two" / "checkpoints" / "step_00000004" / "shard-00003-of-00004.pt"));
  // Every shard (ranks 0-3, written by both nodes into the shared folder), the model's rest and
  // the meta: the single launch's checkpoint byte for byte.
  frugal::test::check_identical(dir / "one" / "checkpoints" / "step_00000004",
                                dir / "two" / "checkpoints" / "step_00000004");
  // The same under torchrun's multi-node environment (its agent on node 0 serves the store).
  const int torchrun_port = frugal::test::free_port();
  const Nodes torchrun = run_both(torchrun_node(0, torchrun_port, train_args(dir.path(), "torchrun")),
                                  torchrun_node(1, torchrun_port, train_args(dir.path(), "torchrun")), 300);
  INFO(torchrun.first.out << torchrun.first.err << torchrun.second.out << torchrun.second.err);
  REQUIRE(torchrun.first.exit_code == 0);
  REQUIRE(torchrun.second.exit_code == 0);
  frugal::test::check_identical(dir / "one" / "checkpoints" / "step_00000004",
                                dir / "torchrun" / "checkpoints" / "step_00000004");
}

TEST_CASE("launches that disagree on the job's size end at once with one line",
          "[multiproc][launch][nodes][bad_input]") {
  using namespace test_multi_node;
  frugal::test::TempDir dir("frugal-nodes-size");
  const int port = frugal::test::free_port();
  // Node 0 counts two nodes of two ranks; node 1 was told three.
  const Nodes n = run_both(node_launch(2, 0, port, train_args(dir.path(), "job")),
                           node_launch(3, 1, port, train_args(dir.path(), "job")), 120);
  const std::string said = n.first.out + n.first.err + n.second.out + n.second.err;
  INFO(said);
  CHECK(n.first.exit_code != 0);
  CHECK(n.second.exit_code != 0);
  // Without waiting out the rendezvous: well within distributed.timeout_s.
  CHECK(n.seconds < kTimeoutS + kGraceS);
  const std::string line = "was started for a job of 6 ranks, rank 0 for a job of 4: the launches disagree";
  CHECK_THAT(n.second.out + n.second.err, Catch::Contains(line));
  // Node 0's ranks end with the same line (left in the store by the rank that saw it).
  CHECK_THAT(n.first.out + n.first.err, Catch::Contains(line) && Catch::Contains("ends with it"));
}

TEST_CASE("a launch whose master nobody serves ends within the timeout naming the address",
          "[multiproc][launch][nodes][bad_input]") {
  using namespace test_multi_node;
  frugal::test::TempDir dir("frugal-nodes-master");
  const int port = frugal::test::free_port();
  const auto start = Clock::now();
  // A shorter wait than the other jobs' (the last --set wins): nothing here needs longer.
  constexpr int kWaitS = 3;
  const CommandResult r = frugal::test::run_command(
      node_launch(2, 1, port,
                  train_args(dir.path(), "job") + " --set distributed.timeout_s=" + std::to_string(kWaitS)),
      120);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  CHECK(seconds < kWaitS + kGraceS);
  CHECK_THAT(r.out + r.err, Catch::Contains("could not meet the others at 127.0.0.1:" +
                                            std::to_string(port)));
}

TEST_CASE("a rank dying on one node ends both launches naming it",
          "[multiproc][launch][nodes]") {
  using namespace test_multi_node;
  frugal::test::TempDir dir("frugal-nodes-fault");
  const int port = frugal::test::free_port();
  // Rank 3 (node 1's second rank) dies by SIGKILL in step 3.
  const Nodes n = run_both(node_launch(2, 0, port, train_args(dir.path(), "job")),
                           node_launch(2, 1, port, train_args(dir.path(), "job"),
                                       "FRUGAL_FAULT_ABORT=3:3"),
                           180);
  INFO(n.first.out << n.first.err << "\n---- node 1\n" << n.second.out << n.second.err);
  CHECK(n.first.exit_code != 0);
  CHECK(n.second.exit_code != 0);
  CHECK(n.seconds < 2 * kTimeoutS + kGraceS + 30);
  // Node 1's launcher saw its rank die; node 0's ranks waited in a collective until the
  // timeout and say which rank left them waiting.
  CHECK_THAT(n.second.out + n.second.err, Catch::Contains("rank 3"));
  CHECK_THAT(n.first.out + n.first.err, Catch::Contains("rank 3"));
}

TEST_CASE("doctor --distributed over two nodes measures the links within a node and across nodes",
          "[multiproc][launch][nodes][doctor]") {
  using namespace test_multi_node;
  const int port = frugal::test::free_port();
  const std::string config = (frugal::test::source_dir() / "configs/tiny-gpt.yaml").string();
  const std::string args = "doctor --json --distributed --distributed-mib 2 " + frugal::test::quote(config);
  const Nodes n = run_both(node_launch(2, 0, port, args), node_launch(2, 1, port, args), 180);
  INFO(n.first.out << n.first.err << n.second.out << n.second.err);
  REQUIRE(n.first.exit_code == 0);
  REQUIRE(n.second.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(frugal::test::rank0_text(n.first.out));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& f : j.at("findings")) by_name[f.at("name").get<std::string>()] = f;
  CHECK_THAT(by_name["distributed job"].at("value").get<std::string>(),
             Catch::Contains("4 ranks on 2 node(s)"));
  // The whole job's figures, then rank 0's node (ranks 0 and 1) and rank 0's slot across the
  // nodes (ranks 0 and 2): each group's collectives returned the right values.
  for (const char* name : {"all_reduce 2 MiB", "all_gather 2 MiB", "within a node: all_reduce 2 MiB",
                           "within a node: all_gather 2 MiB", "across nodes: all_reduce 2 MiB",
                           "across nodes: all_gather 2 MiB"}) {
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    CHECK(by_name[name].at("verdict") == "info");
    std::smatch m;
    const std::string v = by_name[name].at("value").get<std::string>();
    REQUIRE(std::regex_search(v, m, std::regex("([0-9.]+) GiB/s bus bandwidth")));
    CHECK(std::stod(m[1]) > 0.0);
  }
  // With a config, every mode's bytes per step at world 4, and hsdp (2 nodes of 2): zero3's
  // 3(N-1)/N x the model within a node of 2, plus the gradient shards (half the model)
  // all-reduced across the 2 nodes, 2(2-1)/2 x: 8 bytes a parameter, against flat zero3's 9.
  std::smatch m;
  const std::string compute = by_name["compute per step"].at("value").get<std::string>();
  REQUIRE(std::regex_search(compute, m, std::regex("\\((\\d+) trained parameters")));
  const int64_t params = std::stoll(m[1]);
  auto sent = [&](const std::string& mode) {
    std::smatch b;
    const std::string v = by_name["communication " + mode].at("value").get<std::string>();
    return std::regex_search(v, b, std::regex("\\((\\d+) B\\)")) ? std::stoll(b[1]) : int64_t{-1};
  };
  CHECK(sent("zero3") == 9 * params);
  CHECK(sent("hsdp") == 8 * params);
  // Node 1's launch prints no report of its own.
  CHECK(n.second.out.find("\"findings\"") == std::string::npos);
}
