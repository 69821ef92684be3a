// Seeing inside a step: train.profile writes a Chrome trace (LibTorch's profiler) in which
// frugal's own ranges nest as the step runs them (micro-steps around forward and backward,
// recomputes inside backward, collectives inside the phase that waits for them, the offloaded
// host steps), and metrics.jsonl carries per-phase times that partition the step.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "frugal/util/trace.h"
#include "support/cli.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;
using nlohmann::json;

namespace {

struct TraceEvent {
  std::string name;
  int64_t tid = 0;
  double ts = 0, end = 0;
};

// The complete ("X") events of a Chrome trace named frugal/..., and whether any ATen operator
// was recorded.
std::vector<TraceEvent> frugal_events(const std::filesystem::path& file, bool& saw_aten) {
  const json trace = json::parse(test::read_text(file));
  std::vector<TraceEvent> out;
  saw_aten = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.at("name").get<std::string>();
    if (name.rfind("aten::", 0) == 0) saw_aten = true;
    if (name.rfind("frugal/", 0) != 0) continue;
    const double ts = e.at("ts").get<double>();
    out.push_back({name.substr(7), e.at("tid").is_number() ? e.at("tid").get<int64_t>() : 0, ts,
                   ts + e.at("dur").get<double>()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ts < b.ts; });
  return out;
}

std::vector<TraceEvent> named(const std::vector<TraceEvent>& events, const std::string& prefix) {
  std::vector<TraceEvent> out;
  for (const auto& e : events) {
    if (e.name.rfind(prefix, 0) == 0) out.push_back(e);
  }
  return out;
}

bool inside(const TraceEvent& inner, const TraceEvent& outer) {
  return inner.tid == outer.tid && inner.ts >= outer.ts && inner.end <= outer.end;
}

// The innermost-first check: every `inner` event lies inside some `outer` event.
void check_nested(const std::vector<TraceEvent>& events, const std::string& inner,
                  const std::string& outer) {
  const auto in = named(events, inner);
  const auto out = named(events, outer);
  REQUIRE(!in.empty());
  for (const auto& e : in) {
    INFO(e.name << " at " << e.ts << " inside a " << outer);
    CHECK(std::any_of(out.begin(), out.end(), [&](const auto& o) { return inside(e, o); }));
  }
}

std::string small_run(const test::TempDir& dir, const std::string& name) {
  return "train --set run.dir=" + test::quote(dir.path().string()) + " --set run.name=" + name +
         " " + test::transformer_sets("gpt", 2, 2, 32, 32, 256) +
         " --set data.micro_batch_size=4 --set data.num_workers=0"
         " --set train.max_steps=4 --set train.log_every=1 --set train.eval_batches=0"
         " --set train.progress=lines --set generate.tokens=0"
         " --set strategy.accumulation=2 --set strategy.checkpointing.policy=full";
}

}  // namespace

TEST_CASE("train.profile writes a Chrome trace with frugal's ranges nested as the step runs",
          "[integration][profile][cli]") {
  test::TempDir dir("frugal-profile");
  // zero3 in a job of one still gathers and reduce-scatters (through Gloo); the optimizer is
  // offloaded and, with nothing clipping, steps on its own thread during backward.
  auto r = test::frugal(small_run(dir, "p") +
                            " --set strategy.sharding.mode=zero3 --set strategy.offload.optimizer=true"
                            " --set optim.clip_grad_norm=0 --set train.profile.start_step=2"
                            " --set train.profile.steps=2 --set train.profile.memory=true",
                        300);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto trace_file = dir / "p" / "profile" / "trace.json";
  REQUIRE(std::filesystem::exists(trace_file));
  CHECK(!std::filesystem::exists(trace_file.string() + ".partial"));
  bool saw_aten = false;
  const auto events = frugal_events(trace_file, saw_aten);
  CHECK(saw_aten);

  // Two steps profiled (2 and 3), two micro-steps each.
  const auto optimizer = named(events, "optimizer");
  REQUIRE(optimizer.size() == 2);
  const auto micro0 = named(events, "micro_step 0");
  const auto micro1 = named(events, "micro_step 1");
  REQUIRE(micro0.size() == 2);
  REQUIRE(micro1.size() == 2);
  for (int s = 0; s < 2; ++s) {
    // In order: micro-step 0, micro-step 1, then the step's unscale and optimizer.
    CHECK(micro0[s].end <= micro1[s].ts);
    CHECK(micro1[s].end <= optimizer[s].ts);
  }
  check_nested(events, "forward", "micro_step");
  check_nested(events, "backward", "micro_step");
  check_nested(events, "recompute", "backward");
  // zero3 gathers each unit in forward and in the recompute, and reduce-scatters in backward.
  check_nested(events, "all_gather", "micro_step");
  check_nested(events, "reduce_scatter", "backward");
  check_nested(events, "grad_norm", "optimizer");
  check_nested(events, "update", "optimizer");
  // Each micro-step's forward comes before its backward.
  for (const auto& m : micro0) {
    const auto f = std::find_if(events.begin(), events.end(),
                                [&](const auto& e) { return e.name == "forward" && inside(e, m); });
    const auto b = std::find_if(events.begin(), events.end(),
                                [&](const auto& e) { return e.name == "backward" && inside(e, m); });
    REQUIRE(f != events.end());
    REQUIRE(b != events.end());
    CHECK(f->end <= b->ts);
  }
  // The offloaded optimizer: gradients to the host, the host step and the copy back, on the
  // pipeline's own thread (which joined the profile).
  const auto host_steps = named(events, "offload/host_step");
  REQUIRE(!host_steps.empty());
  CHECK(!named(events, "offload/copy_to_host").empty());
  CHECK(!named(events, "offload/copy_to_device").empty());
  CHECK(host_steps.front().tid != micro0.front().tid);
  // train.profile.memory: the allocator's events are in the trace.
  const json trace = json::parse(test::read_text(trace_file));
  CHECK(std::any_of(trace.at("traceEvents").begin(), trace.at("traceEvents").end(),
                    [](const json& e) { return e.value("name", "") == "[memory]"; }));
  // Named after its final file, not the temporary one Kineto wrote.
  CHECK(trace.at("traceName") == trace_file.string());
  // On a machine without a GPU, Kineto's "gpuGetDeviceCount failed" is neither on the console
  // nor in the trace.
  if (!at::globalContext().hasCUDA()) {
    CHECK(r.out.find("gpuGetDeviceCount") == std::string::npos);
    CHECK(r.err.find("gpuGetDeviceCount") == std::string::npos);
    CHECK(test::read_text(trace_file).find("gpuGetDeviceCount") == std::string::npos);
  }
}

TEST_CASE("metrics.jsonl's phase times partition each step", "[integration][profile][cli]") {
  test::TempDir dir("frugal-phases");
  auto r = test::frugal(small_run(dir, "t") + " --set optim.clip_grad_norm=1e-6", 300);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(test::read_text(dir / "t" / "metrics.jsonl"));
  int records = 0;
  double phases_total = 0, steps_total = 0;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line);
    if (!j.contains("step_time_s")) continue;
    ++records;
    const double step = j.at("step_time_s").get<double>();
    double in_step = 0;
    for (const char* phase : {"forward", "backward", "comm_wait", "optimizer"}) {
      const double t = j.at(fmt::format("time_{}_s", phase)).get<double>();
      CHECK(t >= 0);
      in_step += t;
    }
    CHECK(j.at("time_forward_s").get<double>() > 0);
    CHECK(j.at("time_backward_s").get<double>() > 0);
    CHECK(j.at("time_optimizer_s").get<double>() > 0);
    CHECK(j.at("time_data_wait_s").get<double>() > 0);
    // A single process has no collective to wait for.
    CHECK(j.at("time_comm_wait_s").get<double>() == 0);
    // The phases never exceed the step...
    CHECK(in_step <= step * 1.0001 + 1e-5);
    phases_total += in_step;
    steps_total += step;
  }
  CHECK(records == 4);
  // ...and cover it (the rest is the engine's bookkeeping): over all steps, as one step of a
  // few milliseconds can lose a scheduler slice between two phases on a busy machine (seen in
  // CI: 6.7 of 8.7 ms).
  CHECK(phases_total >= 0.8 * steps_total);

  // train.phase_timing: false leaves them out.
  auto off = test::frugal(small_run(dir, "off") + " --set train.phase_timing=false", 300);
  REQUIRE(off.exit_code == 0);
  CHECK_THAT(test::read_text(dir / "off" / "metrics.jsonl"),
             !Catch::Contains("time_forward_s"));
}

TEST_CASE("a communication wait inside a phase counts as comm_wait, not as that phase",
          "[unit][profile]") {
  using namespace std::chrono_literals;
  (void)trace::take_phase_times();
  {
    trace::Range forward("forward", trace::Phase::forward);
    std::this_thread::sleep_for(20ms);
    // A wait on another thread (as in a backward hook) is taken out as well.
    std::thread([] {
      trace::Range wait("wait all_gather", trace::Phase::comm_wait);
      std::this_thread::sleep_for(40ms);
    }).join();
  }
  const trace::PhaseTimes t = trace::take_phase_times();
  CHECK(t[trace::Phase::comm_wait] >= 0.040);
  CHECK(t[trace::Phase::forward] >= 0.020);
  CHECK(t[trace::Phase::forward] < 0.040);  // 60 ms of wall time, 40 of them waiting
  CHECK(trace::take_phase_times().total() == 0);

  // Recorded ranges: name, start and end on trace::now_us()'s clock.
  const int64_t before = trace::now_us();
  trace::record_ranges(true);
  { trace::Range r("optimizer", trace::Phase::optimizer); }
  trace::record_ranges(false);
  const auto ranges = trace::take_recorded_ranges();
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0].name == "optimizer");
  CHECK(ranges[0].start_us >= before);
  CHECK(ranges[0].end_us >= ranges[0].start_us);
  CHECK(ranges[0].end_us <= trace::now_us());
  CHECK(trace::collective_name("all_reduce", 3 << 20) == "all_reduce 3.0 MiB");
}
