// memory.record_history on the CPU: the tracking allocator's events replay its live bytes,
// the bounded buffer keeps the most recent events and counts the rest, nothing is recorded
// once stopped.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "frugal/memory/cpu_history.h"
#include "frugal/memory/cpu_tracking.h"

TEST_CASE("the CPU allocator's history replays its live bytes", "[unit][memory]") {
  frugal::memory::install_cpu_tracking();
  frugal::memory::start_cpu_history(1000);
  CHECK(frugal::memory::cpu_history_recording());
  {
    at::Tensor a = at::empty({1000}, at::kFloat);  // 4000 bytes
    at::Tensor b = at::empty({10}, at::kDouble);   // 80 bytes
  }
  const frugal::memory::CpuHistory h = frugal::memory::stop_cpu_history();
  CHECK_FALSE(frugal::memory::cpu_history_recording());
  REQUIRE(h.events.size() == 4);
  CHECK(h.events[0].delta == 4000);
  CHECK(h.events[1].delta == 80);
  CHECK(h.events[2].delta + h.events[3].delta == -4080);  // freed, in either order
  int64_t live = h.live_at_start;
  for (const auto& e : h.events) {
    live += e.delta;
    CHECK(e.live == live);
    CHECK(e.t_us >= h.start_us);
    CHECK(e.t_us <= h.end_us);
  }
  CHECK(live == h.live_at_start);
  CHECK(h.dropped == 0);
  at::Tensor after = at::empty({16});
  CHECK(frugal::memory::stop_cpu_history().events.empty());  // stopped: nothing recorded
}

TEST_CASE("the CPU allocator's history keeps the most recent events", "[unit][memory]") {
  frugal::memory::install_cpu_tracking();
  frugal::memory::start_cpu_history(3);
  for (int64_t n = 1; n <= 5; ++n) at::Tensor t = at::empty({n}, at::kByte);  // 10 events
  const frugal::memory::CpuHistory h = frugal::memory::stop_cpu_history();
  REQUIRE(h.events.size() == 3);
  CHECK(h.dropped == 7);
  // The last three, oldest first: free of 4 bytes, allocation and free of 5.
  CHECK(h.events[0].delta == -4);
  CHECK(h.events[1].delta == 5);
  CHECK(h.events[2].delta == -5);
  CHECK(h.events[1].live == h.events[0].live + 5);
}
