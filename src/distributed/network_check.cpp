#include "frugal/distributed/network_check.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace frugal::dist {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Device work finished before a clock is read (CUDA runs asynchronously).
void settle(const at::Tensor& t) {
  if (t.is_cuda()) (void)t.sum().item<double>();
}

}  // namespace

std::vector<CollectiveBandwidth> measure_collectives(Communicator& comm,
                                                     const std::vector<int64_t>& sizes,
                                                     int rounds) {
  const int n = comm.size();
  const auto options = at::TensorOptions().dtype(at::kFloat).device(comm.device());
  std::vector<CollectiveBandwidth> out;
  for (int64_t bytes : sizes) {
    const int64_t elements = std::max<int64_t>(bytes / 4 / n * n, n);
    at::Tensor buffer = at::ones({elements}, options);
    at::Tensor piece = at::ones({elements / n}, options);
    for (const char* op : {"all_reduce", "all_gather"}) {
      const bool reduce = std::string(op) == "all_reduce";
      auto once = [&] {
        if (reduce) {
          comm.all_reduce(buffer, Reduce::kSum, /*async=*/false, "doctor");
        } else {
          comm.all_gather(buffer, piece, /*async=*/false, "doctor");
        }
      };
      // Warm-up (connections, buffers), checked: every rank contributes its rank + 1.
      const double mine = comm.rank() + 1;
      (reduce ? buffer : piece).fill_(mine);
      once();
      const double want_sum = static_cast<double>(n) * (n + 1) / 2;
      bool correct = reduce ? buffer.eq(want_sum).all().item<bool>()
                            : buffer.view({n, -1}).select(1, 0).equal(
                                  at::arange(1, n + 1, buffer.options()));
      correct = all_reduce_scalar(comm, correct ? 0.0 : 1.0, Reduce::kMax) == 0.0;
      comm.barrier();
      const auto start = Clock::now();
      for (int r = 0; r < rounds; ++r) once();
      settle(buffer);
      // The job goes at its slowest rank's pace.
      const double seconds = all_reduce_scalar(comm, since(start) / rounds, Reduce::kMax);
      const double moved = static_cast<double>(elements * 4) * (n - 1) / n * (reduce ? 2.0 : 1.0);
      out.push_back({op, elements * 4, seconds, seconds > 0 ? moved / seconds : 0.0, correct});
    }
  }
  return out;
}

double measure_matmul_flops(const c10::Device& device, double seconds) {
  const int64_t side = device.is_cuda() ? 4096 : 512;
  const auto options =
      at::TensorOptions().dtype(device.is_cuda() ? at::kBFloat16 : at::kFloat).device(device);
  const at::Tensor a = at::randn({side, side}, options), b = at::randn({side, side}, options);
  at::Tensor c = at::matmul(a, b);  // warm-up
  settle(c);
  int64_t products = 0;
  const auto start = Clock::now();
  do {
    c = at::matmul(a, b);
    ++products;
    if (products % 8 == 0) settle(c);
  } while (since(start) < seconds);
  settle(c);
  const double elapsed = since(start);
  return 2.0 * static_cast<double>(side * side * side) * static_cast<double>(products) / elapsed;
}

std::vector<CommShare> predict_comm_share(const std::vector<std::pair<std::string, ShardingTraits>>& modes,
                                          int64_t params, int64_t element_bytes, int world,
                                          int group, const LinkBandwidth& job,
                                          const LinkBandwidth& within, const LinkBandwidth& across,
                                          double compute_s) {
  const double model = static_cast<double>(params * element_bytes);
  auto seconds = [](double bytes, double bus, double fallback) {
    const double bw = bus > 0 ? bus : fallback;
    return bytes > 0 && bw > 0 ? bytes / bw : 0.0;
  };
  std::vector<CommShare> out;
  for (const auto& [mode, traits] : modes) {
    const StepTraffic t = step_traffic(traits, model, world, group);
    CommShare s;
    s.mode = mode;
    s.sent_bytes = static_cast<int64_t>(t.total());
    if (traits.replicated_groups) {
      s.comm_s = seconds(t.within, within.gather, job.gather) + seconds(t.across, across.reduce, job.reduce);
    } else {
      s.comm_s = seconds(t.within, traits.shards_optimizer_state ? job.gather : job.reduce, 0.0);
    }
    s.compute_s = compute_s;
    s.share = s.comm_s + compute_s > 0 ? s.comm_s / (s.comm_s + compute_s) : 0.0;
    out.push_back(s);
  }
  return out;
}

}  // namespace frugal::dist
