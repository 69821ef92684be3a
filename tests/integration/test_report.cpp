// frugal report: one self-contained HTML page from a 2-rank run (curves per rank, summary,
// config), rendered by headless Chromium into a screenshot that is not blank, with no script
// errors; the allocator-history timeline read from a snapshot pickle.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "frugal/train/report.h"
#include "support/cli.h"

using namespace frugal;

TEST_CASE("frugal report renders a run into one self-contained page", "[integration][report]") {
  test::TempDir dir;
  test::CommandResult train = test::frugal(
      "launch --nproc-per-node 2 --master-port 0 -- train " +
      test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()) + " --set run.dir=" +
      test::quote(dir.path().string()) +
      " --set train.max_steps=8 --set train.log_every=1 --set train.eval_every=4"
      " --set strategy.sharding=ddp --set generate.tokens=0");
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const auto run = dir / "tiny-gpt";
  test::CommandResult r = test::frugal("report " + test::quote(run.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = test::read_text(run / "report.html");
  CHECK_THAT(html, Catch::Contains("<svg") && Catch::Contains("Step time per rank") &&
                       Catch::Contains("rank 1") && Catch::Contains("validation loss") &&
                       Catch::Contains("Resolved config") && Catch::Contains("sharding"));
  // Self-contained: no script, nothing fetched.
  CHECK_THAT(html, !Catch::Contains("<script") && !Catch::Contains("src="));
  // An existing report is kept unless asked.
  test::CommandResult again = test::frugal("report " + test::quote(run.string()));
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.out + again.err, Catch::Contains("already exists"));

  // Headless Chromium: a screenshot with content, and no console errors.
  const auto shot = dir / "shot.png";
  test::CommandResult chrome = test::run_command(
      "chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 "
      "--window-size=800,1600 --screenshot=" + test::quote(shot.string()) + " " +
          test::quote("file://" + (run / "report.html").string()),
      120);
  INFO(chrome.out << chrome.err);
  REQUIRE(std::filesystem::exists(shot));
  CHECK_THAT(chrome.out + chrome.err, !Catch::Contains("Uncaught") && !Catch::Contains(":CONSOLE("));
  test::CommandResult stats = test::run_command(
      test::python() + " " + test::quote((test::source_dir() / "tests/python/png_stats.py").string()) +
      " " + test::quote(shot.string()));
  INFO(stats.out << stats.err);
  REQUIRE(stats.exit_code == 0);
  const auto s = nlohmann::json::parse(stats.out);
  CHECK(s.at("width") == 800);
  CHECK(s.at("colors").get<int>() > 20);           // text, axes and coloured curves
  CHECK(s.at("non_white").get<double>() > 0.01);   // not a blank page
}

TEST_CASE("the allocator history's timeline is read from a snapshot pickle", "[integration][report]") {
  test::TempDir dir;
  const auto file = dir / "memory_snapshot.pickle";
  // The shape torch.cuda.memory._snapshot() has (device_traces: per device, a list of events).
  test::CommandResult py = test::run_command(
      test::python() + " -c " +
      test::quote("import pickle,sys; ev=lambda a,s,t: {'action': a, 'addr': 0, 'size': s, "
                  "'time_us': t, 'stream': 0}; open(sys.argv[1], 'wb').write(pickle.dumps("
                  "{'segments': [], 'device_traces': [[ev('alloc', 100, 1), ev('alloc', 50, 2), "
                  "ev('free_requested', 100, 3), ev('free_completed', 100, 4)]]}, protocol=2))") +
      " " + test::quote(file.string()));
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  const auto timeline = allocation_timeline(test::read_text(file));
  REQUIRE(timeline.size() == 3);
  CHECK(timeline[0] == std::make_pair(1.0, 100.0));
  CHECK(timeline[1] == std::make_pair(2.0, 150.0));
  CHECK(timeline[2] == std::make_pair(4.0, 50.0));
}
