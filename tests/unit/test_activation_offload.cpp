// Activation offload is a memory-only change: gradients bit-identical to the run without it,
// with and without checkpointing (dropout included), while the device (on the CPU: frugal's
// tracking allocator) keeps a fraction of the activations and the host pool holds the rest;
// the copies come back one block ahead of backward.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/gpt.h"
#include "frugal/strategy/activation_offload.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/recompute.h"

#include <torch/csrc/autograd/autograd.h>

using namespace frugal;

namespace activation_offload_test {

GptOptions offload_gpt(int64_t n_layer, int64_t n_embd, double dropout) {
  return GptOptions::sized(64, 64, n_layer, 2, n_embd, dropout);
}

struct OffloadRun {
  at::Tensor loss;
  std::vector<at::Tensor> grads;
  at::Tensor rng;
  int64_t after_forward = 0;  // device bytes alive after forward, above the level before it
  int64_t backward_peak = 0;  // device peak during forward + backward, above that level
  ActivationOffloadStats host;
};

// One forward + backward of a fresh seeded GPT with `policy` checkpointing and, when
// `prefetch` >= 0, activation offload with that prefetch depth.
OffloadRun offload_run(const GptOptions& o, const std::string& policy, int64_t prefetch,
                       int64_t B, int64_t T) {
  memory::install_cpu_tracking();
  at::manual_seed(11);
  Gpt gpt(o);
  CheckpointingConfig cfg;
  cfg.policy = policy;
  apply_checkpointing(gpt, cfg, gpt.block_lists());
  std::shared_ptr<ActivationOffload> offload;
  if (prefetch >= 0) {
    offload = std::make_shared<ActivationOffload>(prefetch, /*pin_memory=*/false);
    CHECK(apply_activation_offload(gpt, offload, gpt.block_lists()) == o.n_layer);
  }
  auto data = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor idx = at::randint(0, o.vocab_size, {B, T}, data, at::kLong);
  at::Tensor y = at::randint(0, o.vocab_size, {B, T}, data, at::kLong);
  OffloadRun r;
  const int64_t before = memory::cpu_counters().current_bytes;
  memory::reset_cpu_peak();
  at::Tensor loss = gpt.loss_sum(gpt.forward(idx), y) / static_cast<double>(y.numel());
  r.after_forward = memory::cpu_counters().current_bytes - before;
  loss.backward();
  r.backward_peak = memory::cpu_counters().peak_bytes - before;
  if (offload) r.host = offload->stats();
  r.loss = loss.detach();
  for (const auto& p : gpt.parameters()) r.grads.push_back(p.grad().clone());
  r.rng = at::detail::getDefaultCPUGenerator().get_state();
  if (offload) CHECK(offload->stats().host_bytes == 0);  // the graph is gone: so are the copies
  return r;
}

int64_t differing_values(const OffloadRun& a, const OffloadRun& b) {
  int64_t n = at::equal(a.loss, b.loss) ? 0 : 1;
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) n += at::equal(a.grads[i], b.grads[i]) ? 0 : 1;
  return n + (at::equal(a.rng, b.rng) ? 0 : 1);
}

}  // namespace activation_offload_test

using namespace activation_offload_test;

TEST_CASE("activation offload with full checkpointing: the same gradients, a quarter of the "
          "device's activation bytes at 12 blocks",
          "[offload][checkpointing][unit][memory]") {
  // 12 blocks, dropout on: the recompute replays it from the input brought back.
  // A small vocabulary: the logits (the head's, outside the blocks) stay a minor share.
  GptOptions o = offload_gpt(12, 128, 0.1);
  o.vocab_size = 32;
  const int64_t B = 4, T = 64;
  const OffloadRun plain = offload_run(o, "none", -1, B, T);
  const OffloadRun full = offload_run(o, "full", -1, B, T);
  const OffloadRun offloaded = offload_run(o, "full", 1, B, T);
  CHECK(differing_values(full, offloaded) == 0);
  CHECK(differing_values(plain, offloaded) == 0);

  // The host holds every block's input, exactly: 12 x (B, T, C) floats.
  const int64_t block_input = B * T * o.n_embd * 4;
  CHECK(offloaded.host.host_peak_bytes == 12 * block_input);
  CHECK(offloaded.host.copies_out == 12);
  // Each came back once, all but the first (the last block's) ahead of backward.
  CHECK(offloaded.host.copies_in == 12);
  CHECK(offloaded.host.prefetched == 11);

  std::ostringstream report;
  report << "12-block GPT, C 128, V 32, B 4, T 64: device bytes after forward: none "
         << plain.after_forward / 1024 << " KiB, full " << full.after_forward / 1024
         << " KiB, full + offload " << offloaded.after_forward / 1024
         << " KiB; backward peak: none " << plain.backward_peak / 1024 << " KiB, full "
         << full.backward_peak / 1024 << " KiB, full + offload "
         << offloaded.backward_peak / 1024 << " KiB; host pool peak "
         << offloaded.host.host_peak_bytes / 1024 << " KiB";
  WARN(report.str());
  // What forward leaves on the device for backward: the blocks' inputs are gone from it.
  CHECK(full.after_forward - offloaded.after_forward == 12 * block_input);
  CHECK(offloaded.after_forward * 4 <= full.after_forward);
  // Backward's peak comes at its start (the logits' gradient), before any block: not higher.
  CHECK(offloaded.backward_peak <= full.backward_peak);
}

TEST_CASE("activation offload without checkpointing: every saved activation goes to the host",
          "[offload][unit][memory]") {
  const GptOptions o = offload_gpt(4, 64, 0.1);
  const int64_t B = 4, T = 64;
  const OffloadRun plain = offload_run(o, "none", -1, B, T);
  const OffloadRun offloaded = offload_run(o, "none", 1, B, T);
  CHECK(differing_values(plain, offloaded) == 0);
  // Far more than the block inputs: what each block saves for backward (layer norms,
  // attention, the MLP), not its parameters.
  CHECK(offloaded.host.host_peak_bytes > 4 * 4 * B * T * o.n_embd * 4);
  CHECK(offloaded.host.copies_in >= offloaded.host.copies_out);
  CHECK(offloaded.host.prefetched > 0);
  WARN("4-block GPT, C 64, no checkpointing: device bytes after forward " << plain.after_forward / 1024
       << " KiB plain, " << offloaded.after_forward / 1024 << " KiB offloaded; host pool peak "
       << offloaded.host.host_peak_bytes / 1024 << " KiB");
  CHECK(plain.after_forward - offloaded.after_forward >= offloaded.host.host_peak_bytes / 2);
}

TEST_CASE("activation offload: prefetch 0 copies back on demand, 2 keeps two ahead",
          "[offload][checkpointing][unit]") {
  const GptOptions o = offload_gpt(6, 32, 0.0);
  const OffloadRun full = offload_run(o, "full", -1, 2, 32);
  const OffloadRun on_demand = offload_run(o, "full", 0, 2, 32);
  const OffloadRun two = offload_run(o, "full", 2, 2, 32);
  CHECK(differing_values(full, on_demand) == 0);
  CHECK(differing_values(full, two) == 0);
  CHECK(on_demand.host.prefetched == 0);
  CHECK(on_demand.host.copies_in == 6);
  CHECK(two.host.prefetched == 5);
  CHECK(two.host.copies_in == 6);
}

TEST_CASE("a checkpoint with an offloaded input: retain_graph and a second backward",
          "[offload][checkpointing][unit]") {
  auto offload = std::make_shared<ActivationOffload>(1, false);
  at::Tensor w = at::randn({8, 8}).requires_grad_(true);
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  auto fn = [&](const at::Tensor& in) { return at::tanh(at::matmul(in, w)).sum(); };
  at::Tensor plain = fn(x);
  auto g_plain = torch::autograd::grad({plain}, {w, x});
  at::Tensor y = checkpoint([&](const at::Tensor& in) { return at::tanh(at::matmul(in, w)); }, x,
                            offload)
                     .sum();
  auto g1 = torch::autograd::grad({y}, {w, x}, {}, /*retain_graph=*/true);
  auto g2 = torch::autograd::grad({y}, {w, x});
  CHECK(at::equal(g1[0], g_plain[0]));
  CHECK(at::equal(g1[1], g_plain[1]));
  CHECK(at::equal(g2[0], g_plain[0]));
  CHECK(at::equal(g2[1], g_plain[1]));
  CHECK(offload->stats().copies_in == 2);
  // The input modified in place after forward: the recompute would see other values.
  at::Tensor x2 = at::randn({4, 8});
  at::Tensor y2 = checkpoint([&](const at::Tensor& in) { return at::tanh(at::matmul(in, w)); },
                             x2, offload)
                      .sum();
  x2.add_(1.0);
  CHECK_THROWS_WITH(y2.backward(), Catch::Contains("modified in place"));
}
