// Elements per second of one AdamW step over N fp32 parameters on the CPU, for frugal's fused
// CPU AdamW (fp32 and bf16 parameters), ATen's fused kernel (at::_fused_adamw_, what
// torch.optim.AdamW(fused=True) runs), torch::optim::AdamW (C++, unfused), and the machine's
// copy bandwidth (the bound: 28 bytes per element per step for fp32); and the optimizer phase
// of a training step with clipping as frugal's engine runs it (gradient norm, then FusedAdamW
// with the clip coefficient folded into its update). Medians of `reps` steps after warm-up;
// one JSON line.   frugal_bench_cpu_adam N [reps]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <vector>

#include "frugal/optim/clip.h"
#include "frugal/optim/cpu_adam.h"
#include "frugal/optim/fused_adam.h"

namespace {

double median_seconds(const std::function<void()>& fn, int reps) {
  for (int i = 0; i < 2; ++i) fn();  // warm-up: pages touched, state allocated
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::stoll(argv[1]) : 10'000'000;
  const int reps = argc > 2 ? std::stoi(argv[2]) : 10;
  at::manual_seed(0);
  const double lr = 1e-3, wd = 0.01;
  nlohmann::json out = {{"n", n}, {"threads", at::get_num_threads()}};
  auto rate = [&](double seconds) { return static_cast<double>(n) / seconds; };

  {  // frugal, fp32
    at::Tensor p = at::randn({n}), g = at::randn({n}), m = at::zeros({n}), v = at::zeros({n});
    int64_t step = 0;
    frugal::AdamHyper h;
    h.lr = lr;
    h.weight_decay = wd;
    out["frugal_fp32"] = rate(median_seconds([&] { frugal::cpu_adam_step(p, g, m, v, h, ++step); }, reps));
  }
  {  // frugal, bf16 parameters and gradients, fp32 moments
    at::Tensor p = at::randn({n}).to(at::kBFloat16), g = at::randn({n}).to(at::kBFloat16);
    at::Tensor m = at::zeros({n}), v = at::zeros({n});
    int64_t step = 0;
    frugal::AdamHyper h;
    h.lr = lr;
    h.weight_decay = wd;
    out["frugal_bf16"] = rate(median_seconds([&] { frugal::cpu_adam_step(p, g, m, v, h, ++step); }, reps));
  }
  {  // ATen's fused AdamW
    at::Tensor p = at::randn({n}), g = at::randn({n}), m = at::zeros({n}), v = at::zeros({n});
    int64_t step = 0;
    out["aten_fused"] = rate(median_seconds([&] {
      at::Tensor s = at::full({}, static_cast<double>(++step));
      at::_fused_adamw_({p}, {g}, {m}, {v}, {}, {s}, lr, 0.9, 0.999, wd, 1e-8, false, false);
    }, reps));
  }
  {  // the engine's optimizer phase with clipping to 1.0: the norm (one read of the gradients),
     // then the update with the coefficient folded in (no pass that scales the gradients)
    at::Tensor p = at::randn({n}).requires_grad_(true);
    p.mutable_grad() = at::randn({n});
    frugal::FusedAdamW opt({p}, torch::optim::AdamWOptions(lr).weight_decay(wd));
    out["frugal_clip"] = rate(median_seconds([&] {
      const double norm = std::sqrt(frugal::grad_norm_squared({p}).item<double>());
      opt.set_gradient_factor(frugal::clip_coefficient(norm, 1.0));
      opt.step();
    }, reps));
  }
  {  // torch::optim::AdamW, the C++ frontend's unfused loop
    at::Tensor p = at::randn({n}).requires_grad_(true);
    p.mutable_grad() = at::randn({n});
    torch::optim::AdamW opt({p}, torch::optim::AdamWOptions(lr).weight_decay(wd));
    out["torch_cpp"] = rate(median_seconds([&] { opt.step(); }, reps));
  }
  {  // memory bandwidth, two ways over 7 floats per element (what one Adam step touches):
     // a copy (read one buffer, write another: the write also reads the destination line
     // first), and an in-place scale (read and write the same lines, as Adam does)
    at::Tensor a = at::randn({n * 7}), b = at::empty_like(a);
    const double copy = median_seconds([&] { b.copy_(a); }, reps);
    out["copy_bytes_per_s"] = 2.0 * static_cast<double>(a.nbytes()) / copy;
    const double inplace = median_seconds([&] { a.mul_(1.0000001); }, reps);
    out["inplace_bytes_per_s"] = 2.0 * static_cast<double>(a.nbytes()) / inplace;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
