// The parts of optimizer offload's CUDA path that a CPU machine can check (docs/gpu.md lists
// the rest and the row of tools/gpu/check.sh that covers it): the order of the stream calls
// (markers, side-stream copies, waits), the handover of ready gradients to the host thread,
// the page arithmetic of page-locked memory and the layout of the one host buffer.
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "frugal/strategy/offload.h"
#include "frugal/strategy/offload_stream.h"

using namespace frugal;
namespace os = frugal::offload_stream;

namespace {

// Parameters of assorted sizes with gradients (one frozen, one bf16).
std::vector<at::Tensor> make_params() {
  at::manual_seed(11);
  std::vector<at::Tensor> ps;
  for (int64_t n : {1, 3, 17, 64, 100, 7}) ps.push_back(at::randn({n}).requires_grad_(true));
  ps.push_back(at::randn({5, 3}).to(at::kBFloat16).requires_grad_(true));
  ps.push_back(at::randn({9}));  // frozen: a master, no gradient
  for (auto& p : ps) {
    if (p.requires_grad()) p.mutable_grad() = at::randn_like(p);
  }
  return ps;
}

struct Recording {
  std::vector<os::TraceEvent> events;
  Recording() { os::record_trace(&events); }
  ~Recording() { os::record_trace(nullptr); }
};

// A plain SGD step, as the offloaded one must compute it (fp32 masters; add with alpha, as
// SGD's own update, so that the rounding is the same).
std::vector<at::Tensor> sgd_reference(const std::vector<at::Tensor>& ps, double lr) {
  std::vector<at::Tensor> out;
  for (const auto& p : ps) {
    at::Tensor m = p.detach().to(at::kFloat);
    if (p.requires_grad()) m = m.add(p.grad().to(at::kFloat), -lr);
    out.push_back(m.to(p.scalar_type()));
  }
  return out;
}

// Parameters, their plain SGD step, and an offloaded SGD over them whose stream calls are
// recorded from then on.
struct OffloadedSgd {
  std::vector<at::Tensor> ps = make_params();
  std::vector<at::Tensor> want = sgd_reference(ps, 0.1);
  torch::optim::SGD sgd{ps, torch::optim::SGDOptions(0.1)};
  OptimizerOffload offload{sgd, /*pin_memory=*/true};
  Recording rec;
  void check_stepped() const {
    for (size_t i = 0; i < ps.size(); ++i) CHECK(at::equal(ps[i], want[i]));
  }
};

// An optimizer whose step fails, as a host step can (a bad state, an out-of-memory).
struct FailingOptimizer : torch::optim::SGD {
  using SGD::SGD;
  at::Tensor step(LossClosure) override { throw std::runtime_error("host step failed"); }
};

}  // namespace

TEST_CASE("page-locked ranges start on a page and cover the bytes asked for", "[unit][offload]") {
  CHECK(os::page_span(4096 * 3 + 100, 10000, 4096).skip == 3996);
  CHECK(os::page_span(4096 * 3 + 100, 10000, 4096).locked == 12288);
  CHECK(os::page_span(8192, 4096, 4096).skip == 0);
  CHECK(os::page_span(8192, 4096, 4096).locked == 4096);
  CHECK(os::page_span(8193, 1, 4096).locked == 4096);
  for (uintptr_t address : {uintptr_t{64}, uintptr_t{4095}, uintptr_t{4096}, uintptr_t{123457}}) {
    for (int64_t bytes : {1, 4095, 4096, 4097, 1 << 20}) {
      const os::PageSpan s = os::page_span(address, bytes, 4096);
      CHECK((address + s.skip) % 4096 == 0);
      CHECK(s.skip < 4096);
      CHECK(s.locked >= bytes);
      CHECK(s.locked % 4096 == 0);
      // page_locked_bytes allocates the bytes rounded up to pages, plus one page.
      CHECK(s.skip + s.locked <= (bytes + 4095) / 4096 * 4096 + 4096);
    }
  }
}

TEST_CASE("offload's masters and gradients share one host buffer, 64-byte aligned, exact in size",
          "[unit][offload]") {
  std::vector<at::Tensor> ps = make_params();
  torch::optim::SGD sgd(ps, torch::optim::SGDOptions(0.1));
  OptimizerOffload offload(sgd, /*pin_memory=*/true);
  const at::Tensor& buffer = offload.host_buffer();
  const auto* base = static_cast<const uint8_t*>(buffer.data_ptr());
  int64_t expected = 0, tensors = 0;
  std::vector<std::pair<const uint8_t*, int64_t>> spans;
  for (const auto& master : sgd.param_groups()[0].params()) {
    CHECK(master.scalar_type() == at::kFloat);  // the bf16 parameter's master too
    for (const at::Tensor& t : {master, master.grad()}) {
      if (!t.defined()) continue;
      const auto* at_ = static_cast<const uint8_t*>(t.data_ptr());
      CHECK(at_ >= base);
      CHECK((at_ - base) % 64 == 0);
      CHECK(at_ + t.nbytes() <= base + buffer.nbytes());
      spans.push_back({at_, static_cast<int64_t>(t.nbytes())});
      expected += (static_cast<int64_t>(t.nbytes()) + 63) / 64 * 64;
      ++tensors;
    }
  }
  CHECK(tensors == 2 * 8 - 1);  // the frozen parameter has no gradient buffer
  CHECK(buffer.nbytes() == static_cast<size_t>(expected));
  CHECK(offload.host_bytes() <= expected);
  CHECK(expected - offload.host_bytes() <= 63 * tensors);
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    CHECK(spans[i - 1].first + spans[i - 1].second <= spans[i].first);
}

TEST_CASE("a plain offloaded step: mark, copies in after it, host step, copies back, then a wait",
          "[unit][offload]") {
  OffloadedSgd o;
  o.offload.step(o.sgd);
  const auto& e = o.rec.events;
  REQUIRE(e.size() == 4);
  CHECK(e[0].kind == os::TraceEvent::kMark);
  // The copies to the host start after the point where the gradients were final, and the host
  // waits for them before it steps.
  CHECK(e[1].kind == os::TraceEvent::kSideStream);
  CHECK(e[1].after == e[0].marker);
  CHECK(e[1].wait_host);
  // The copies back need not wait for anything on the side stream's own order, nor block the
  // host; the compute stream waits for their end before the step returns.
  CHECK(e[2].kind == os::TraceEvent::kSideStream);
  CHECK(e[2].after == 0);
  CHECK_FALSE(e[2].wait_host);
  CHECK(e[3].kind == os::TraceEvent::kWait);
  CHECK(e[3].marker == e[2].marker);
  for (const auto& ev : e) CHECK(ev.thread == std::this_thread::get_id());
  o.check_stepped();
}

TEST_CASE("the pipelined step hands ready gradients to the host thread once each, in order",
          "[unit][offload]") {
  OffloadedSgd o;
  const auto& ps = o.ps;
  o.offload.begin_pipeline(o.sgd);
  // Backward's hooks call ready() from its threads; a parameter handed twice is stepped once.
  std::thread a([&] { o.offload.ready({ps[0], ps[1]}); });
  std::thread b([&] { o.offload.ready({ps[2], ps[1]}); });
  a.join();
  b.join();
  o.offload.ready({ps[3]});
  o.offload.finish_pipeline();
  CHECK(o.offload.pipelined_last_step() == 4);
  o.check_stepped();

  // Every copy to the host starts after a marker made earlier by the thread that handed the
  // gradients over; the host thread's copies run on it, not on the handing thread; each copy
  // back is waited for by the compute stream before finish_pipeline returns.
  const auto& e = o.rec.events;
  const auto main_thread = std::this_thread::get_id();
  std::map<int64_t, std::pair<size_t, std::thread::id>> marks;  // id -> (position, thread)
  std::set<int64_t> copies_back, waited;
  int copies_in = 0, on_host_thread = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i].kind == os::TraceEvent::kMark) marks[e[i].marker] = {i, e[i].thread};
    if (e[i].kind == os::TraceEvent::kSideStream && e[i].wait_host) {
      ++copies_in;
      REQUIRE(marks.count(e[i].after) == 1);
      CHECK(marks[e[i].after].first < i);
      if (e[i].thread != main_thread) {
        ++on_host_thread;
        CHECK(marks[e[i].after].second != e[i].thread);
      }
    }
    if (e[i].kind == os::TraceEvent::kSideStream && !e[i].wait_host)
      copies_back.insert(e[i].marker);
    if (e[i].kind == os::TraceEvent::kWait) {
      CHECK(e[i].thread == main_thread);
      waited.insert(e[i].marker);
    }
  }
  CHECK(copies_in == 4);       // three hand-overs with something new, and finish's rest
  CHECK(on_host_thread == 3);  // the hand-overs, stepped by the host thread
  CHECK(copies_back.size() == 4);
  CHECK(waited == copies_back);
  CHECK(e.back().kind == os::TraceEvent::kWait);
}

TEST_CASE("an error in the host thread's step surfaces from finish_pipeline", "[unit][offload]") {
  std::vector<at::Tensor> ps = make_params();
  FailingOptimizer failing(ps, torch::optim::SGDOptions(0.1));
  OptimizerOffload offload(failing, true);
  offload.begin_pipeline(failing);
  offload.ready({ps[0]});
  CHECK_THROWS_WITH(offload.finish_pipeline(), "host step failed");
  // The optimizer's groups were restored: every master is still there.
  CHECK(failing.param_groups()[0].params().size() == ps.size());
}

TEST_CASE("host memory for offload falls back when page-locking is refused",
          "[offload][unit]") {
  auto works = [](int64_t n) { return at::zeros({n}, at::kByte); };
  auto refuses = [](const char* why) {
    return [why](int64_t) -> at::Tensor { throw std::runtime_error(why); };
  };
  SECTION("cudaHostRegister taken when it works") {
    os::HostBytes got = os::host_bytes_with_fallback(100, works, refuses("unused"));
    CHECK(got.kind == os::HostMemory::kRegistered);
    CHECK(got.bytes.numel() == 100);
    CHECK(got.refused.empty());
  }
  SECTION("torch's pinned allocator when cudaHostRegister is refused") {
    os::HostBytes got =
        os::host_bytes_with_fallback(100, refuses("operation not supported\nbacktrace"), works);
    CHECK(got.kind == os::HostMemory::kPinnedAllocator);
    CHECK(got.bytes.numel() == 100);
    CHECK(got.refused == "cudaHostRegister refused: operation not supported");
  }
  SECTION("pageable memory when both are refused, each refusal said") {
    os::HostBytes got =
        os::host_bytes_with_fallback(100, refuses("not supported"), refuses("out of memory"));
    CHECK(got.kind == os::HostMemory::kPageable);
    CHECK(got.bytes.numel() == 100);
    CHECK_FALSE(got.bytes.is_pinned());
    CHECK(got.refused ==
          "cudaHostRegister refused: not supported; the pinned allocator refused: out of memory");
    CHECK(std::string(os::host_memory_name(got.kind)).rfind("pageable", 0) == 0);
  }
  // Without CUDA nothing is pinned: the pinned allocator is not asked.
  if (!at::globalContext().hasCUDA()) CHECK_FALSE(os::pinned_allocator_works());
}
