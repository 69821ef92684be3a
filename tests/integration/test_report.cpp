// frugal report: one self-contained HTML page from a 2-rank run (curves per rank, summary,
// config), rendered by headless Chromium into a screenshot that is not blank, with no script
// errors; two runs differing in one setting overlaid on one page (both colours on screen, the
// setting in the legend, ticks, the smoothing control); the CPU allocator's history
// (memory.record_history) against the run's own peaks, drawn as a timeline; the CUDA
// allocator-history timeline read from a snapshot pickle.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/report/allocation_timeline.h"
#include "frugal/report/report.h"
#include "support/cli.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

const char* kBlue = "#1f77b4";  // the first run's colour
const char* kRed = "#d62728";   // the second's

std::string train_cmd(const fs::path& runs, const std::string& sets) {
  return "train " + test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()) +
         " --set run.dir=" + test::quote(runs.string()) + " --set generate.tokens=0 " + sets;
}

std::string quoted(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += " " + test::quote(w);  // '#' would start a comment
  return out;
}

// Headless Chromium's screenshot of a page, then png_stats.py's figures of it (with the
// pixel counts of `colors`).
nlohmann::json screenshot_stats(const fs::path& page, const fs::path& shot, int height,
                                const std::vector<std::string>& colors = {}) {
  test::CommandResult chrome = test::run_command(
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr "
      "--v=0 --window-size=800," + std::to_string(height) + " --screenshot=" +
          test::quote(shot.string()) + " " + test::quote("file://" + page.string()),
      120);
  INFO(chrome.out << chrome.err);
  REQUIRE(fs::exists(shot));
  // The page's script ran without an error.
  CHECK_THAT(chrome.out + chrome.err, !Catch::Contains("Uncaught") && !Catch::Contains(":CONSOLE("));
  test::CommandResult stats = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/png_stats.py").string()) + " " +
      test::quote(shot.string()) + quoted(colors));
  INFO(stats.out << stats.err);
  REQUIRE(stats.exit_code == 0);
  return nlohmann::json::parse(stats.out);
}

void check_self_contained(const std::string& html) {
  // Nothing fetched: no external script, style, image or font.
  CHECK_THAT(html, !Catch::Contains("src=") && !Catch::Contains("<link") &&
                       !Catch::Contains("@import") && !Catch::Contains("url(http"));
}

}  // namespace

TEST_CASE("frugal report renders a run into one self-contained page", "[integration][report]") {
  test::TempDir dir;
  test::CommandResult train = test::frugal(
      "launch --nproc-per-node 2 --master-port 0 -- " +
      train_cmd(dir.path(), "--set train.max_steps=8 --set train.log_every=1 "
                            "--set train.eval_every=4 --set strategy.sharding=ddp"));
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
  check_self_contained(html);
  // An existing report is kept unless asked.
  test::CommandResult again = test::frugal("report " + test::quote(run.string()));
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.out + again.err, Catch::Contains("already exists"));

  const auto s = screenshot_stats(run / "report.html", dir / "shot.png", 1600);
  CHECK(s.at("width") == 800);
  CHECK(s.at("colors").get<int>() > 20);          // text, axes and coloured curves
  CHECK(s.at("non_white").get<double>() > 0.01);  // not a blank page
}

TEST_CASE("frugal report overlays runs, naming the settings that differ", "[integration][report]") {
  test::TempDir dir;
  const std::string common =
      "--set train.max_steps=12 --set train.log_every=1 --set train.eval_every=4 ";
  for (const auto& [name, precision] : {std::pair{"fp32-run", "fp32"}, {"bf16-run", "bf16-mixed"}}) {
    test::CommandResult train = test::frugal(train_cmd(
        dir.path(), common + "--set run.name=" + name + " --set strategy.precision=" + precision));
    INFO(train.out << train.err);
    REQUIRE(train.exit_code == 0);
  }
  const std::string runs =
      test::quote((dir / "fp32-run").string()) + " " + test::quote((dir / "bf16-run").string());
  // Several runs belong to none of them: the output is named.
  test::CommandResult unnamed = test::frugal("report " + runs);
  CHECK(unnamed.exit_code != 0);
  CHECK_THAT(unnamed.out + unnamed.err, Catch::Contains("-o"));
  const auto page = dir / "compare.html";
  test::CommandResult r = test::frugal("report " + runs + " -o " + test::quote(page.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = test::read_text(page);
  // Both runs, each in its colour, and the one setting that differs, in the legend.
  CHECK_THAT(html, Catch::Contains("fp32-run") && Catch::Contains("bf16-run") &&
                       Catch::Contains(kBlue) && Catch::Contains(kRed));
  CHECK_THAT(html, Catch::Contains("(strategy.precision: fp32)") &&
                       Catch::Contains("(strategy.precision: bf16-mixed)"));
  // Axes with labelled ticks in units, the smoothing control, the log scale for loss.
  CHECK_THAT(html, Catch::Contains("class='tick'") && Catch::Contains(" MiB</text>") &&
                       Catch::Contains("tok/s</text>") && Catch::Contains(">step</text>"));
  CHECK_THAT(html, Catch::Contains("id='smoothing'") && Catch::Contains("log scale") &&
                       Catch::Contains("data-log='1'"));
  check_self_contained(html);

  const auto s = screenshot_stats(page, dir / "compare.png", 1500,
                                  {kBlue, kRed});
  INFO(s.dump());
  // Both runs' curves on screen: far more of each colour than its legend swatch (14 x 10).
  CHECK(s.at("count").at(kBlue).get<int>() > 1000);
  CHECK(s.at("count").at(kRed).get<int>() > 1000);
  CHECK(s.at("colors").get<int>() > 50);
}

TEST_CASE("memory.record_history on the CPU writes the allocator's events, drawn as a timeline",
          "[integration][report]") {
  test::TempDir dir;
  test::CommandResult train = test::frugal(train_cmd(
      dir.path(), "--set train.max_steps=6 --set train.log_every=1 "
                  "--set memory.record_history=true"));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const auto run = dir / "tiny-gpt";
  REQUIRE(fs::exists(run / "memory_history.json"));
  const auto h = nlohmann::json::parse(test::read_text(run / "memory_history.json"));
  CHECK(h.at("device") == "cpu");
  CHECK(h.at("dropped") == 0);
  const auto& events = h.at("events");
  REQUIRE(events.size() > 100);
  // Each event's live bytes follow from the previous one and its delta, from the live bytes
  // when recording started; times are in order and inside the recording.
  int64_t live = h.at("live_at_start").get<int64_t>(), highest = live;
  int64_t t = h.at("start_us").get<int64_t>();
  int64_t allocations = 0;
  for (const auto& e : events) {
    REQUIRE(e.at(0).get<int64_t>() >= t);
    t = e.at(0).get<int64_t>();
    live += e.at(1).get<int64_t>();
    REQUIRE(e.at(2).get<int64_t>() == live);
    highest = std::max(highest, live);
    allocations += e.at(1).get<int64_t>() > 0;
  }
  CHECK(t <= h.at("end_us").get<int64_t>());
  CHECK(allocations > 50);
  // The step's phases (util/trace.h) on the same clock, inside the recording: one forward,
  // backward and optimizer range per step (6 steps, no accumulation), a data wait before each.
  std::map<std::string, int> ranges;
  for (const auto& r : h.at("ranges")) {
    const auto start = r.at(1).get<int64_t>(), end = r.at(2).get<int64_t>();
    CHECK(h.at("start_us").get<int64_t>() <= start);
    CHECK(start <= end);
    CHECK(end <= h.at("end_us").get<int64_t>());
    ++ranges[r.at(0).get<std::string>()];
  }
  CHECK(ranges["forward"] == 6);
  CHECK(ranges["backward"] == 6);
  CHECK(ranges["optimizer"] == 6);
  CHECK(ranges["data_wait"] >= 5);
  CHECK(h.at("dropped_ranges") == 0);
  // The highest live bytes are the run's peak as metrics.jsonl reported it (recording starts
  // before the first step; the tracker's peak restarts there too).
  int64_t reported = 0;
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto rec = nlohmann::json::parse(line);
    if (rec.contains("mem_allocated_peak_bytes")) {
      reported = std::max(reported, rec.at("mem_allocated_peak_bytes").get<int64_t>());
    }
  }
  CHECK(highest == reported);

  test::CommandResult r = test::frugal("report " + test::quote(run.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = test::read_text(run / "report.html");
  CHECK_THAT(html, Catch::Contains("Live bytes over time: tiny-gpt (cpu)") &&
                       Catch::Contains("memory_history.json: " + std::to_string(events.size()) +
                                       " events, highest " + std::to_string(highest) + " bytes"));
  // The phases as rows under the timeline, named, with a legend.
  CHECK_THAT(html, Catch::Contains("class='band'") && Catch::Contains(">forward</text>") &&
                       Catch::Contains(">optimizer</text>"));
  const auto s = screenshot_stats(run / "report.html", dir / "timeline.png", 2400, {kBlue});
  CHECK(s.at("count").at(kBlue).get<int>() > 1000);
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

TEST_CASE("frugal report: charts padded past their data, all-zero phases left out, summary in "
          "the charts' units",
          "[integration][report]") {
  test::TempDir dir;
  test::CommandResult train = test::frugal(
      train_cmd(dir.path(), "--set train.max_steps=6 --set train.log_every=1 "
                            "--set train.phase_timing=true --set train.progress=none"));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const auto run = dir / "tiny-gpt";
  REQUIRE(test::frugal("report " + test::quote(run.string())).exit_code == 0);
  const std::string html = test::read_text(run / "report.html");
  // One process: no communication, so comm_wait has no band, the other phases do.
  CHECK_THAT(html, Catch::Contains(">forward<") && !Catch::Contains(">comm_wait<"));
  // The summary in the units the charts use.
  CHECK_THAT(html, Catch::Contains("<th>median throughput</th><td>") &&
                       Catch::Contains(" tok/s</td>") && Catch::Contains("<th>peak allocated</th>"));
  CHECK_THAT(html, Catch::Contains("iB</td>"));
  // The throughput chart's y range ends above its largest value (both in the chart's unit):
  // no line along the frame.
  const size_t chart = html.find("Throughput");
  REQUIRE(chart != std::string::npos);
  const size_t y1 = html.find("data-y1='", chart);
  const size_t v = html.find("data-v='", chart);
  REQUIRE(y1 != std::string::npos);
  REQUIRE(v != std::string::npos);
  double most = 0;
  std::istringstream values(html.substr(v + 8, html.find('\'', v + 8) - v - 8));
  for (double x; values >> x;) most = std::max(most, x);
  CHECK(most > 0);
  CHECK(std::stod(html.substr(y1 + 9)) >= most * 1.05 * (1 - 1e-9));  // from 0: a twentieth above
  // Charts take the page's width.
  CHECK_THAT(html, Catch::Contains("svg.chart{width:100%;height:auto}"));
}
