// One rank of a multi-process test, started by `frugal launch`, mpirun or torchrun with the
// launcher's environment. Each scenario checks its results itself and exits non-zero (with a
// message on stderr) when one is wrong; rank 0 prints a one-line JSON report on stdout.
//   frugal_dist_worker collectives      all_reduce / broadcast / all_gather / reduce_scatter
//   frugal_dist_worker ddp              DDP on an MLP: overlap, no-sync micro-steps, traffic
//   frugal_dist_worker stuck            rank 1 skips a collective: the others must time out
//   frugal_dist_worker env              prints this rank's RankInfo as JSON
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <iostream>
#include <thread>

#include "frugal/dist/communicator.h"
#include "frugal/dist/ddp.h"
#include "frugal/engine/engine.h"
#include "frugal/util/error.h"

using namespace frugal;
using nlohmann::json;

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

json traffic_json(const dist::Communicator& comm) {
  json j;
  for (const auto& [op, t] : comm.traffic()) {
    j[op] = {{"calls", t.calls}, {"payload_bytes", t.payload_bytes}, {"sent_bytes", t.sent_bytes}};
  }
  return j;
}

DistributedConfig gloo(double timeout_s = 60) {
  DistributedConfig cfg;
  cfg.backend = "gloo";
  cfg.timeout_s = timeout_s;
  return cfg;
}

int collectives() {
  auto comm = dist::init_from_env(gloo());
  const int r = comm->rank(), n = comm->size();
  // all_reduce: sum of (rank + 1) over ranks, and max.
  at::Tensor t = at::full({1000}, r + 1.0);
  comm->all_reduce(t);
  require(at::allclose(t, at::full({1000}, n * (n + 1) / 2.0)), "all_reduce sum");
  at::Tensor m = at::full({3}, static_cast<double>(r));
  comm->all_reduce(m, dist::Reduce::kMax);
  require(m[0].item<double>() == n - 1, "all_reduce max");
  // broadcast from the last rank.
  at::Tensor b = at::arange(10, at::kFloat) * (r == n - 1 ? 1.0 : 0.0);
  comm->broadcast(b, n - 1);
  require(at::equal(b, at::arange(10, at::kFloat)), "broadcast");
  // all_gather: rank r contributes [r, r] -> [0,0,1,1,...].
  at::Tensor in = at::full({2}, static_cast<float>(r));
  at::Tensor out = at::empty({2 * n});
  comm->all_gather(out, in);
  require(at::equal(out, at::arange(n, at::kFloat).repeat_interleave(2)), "all_gather");
  // reduce_scatter: every rank gives arange(2n); rank r gets n * [2r, 2r+1].
  at::Tensor full = at::arange(2 * n, at::kFloat);
  at::Tensor part = at::empty({2});
  comm->reduce_scatter(part, full);
  require(at::equal(part, at::arange(2 * r, 2 * r + 2, at::kFloat) * n), "reduce_scatter");
  comm->barrier();
  if (comm->is_main()) {
    std::cout << json{{"world", n}, {"backend", comm->backend()}, {"traffic", traffic_json(*comm)}}.dump()
              << std::endl;
  }
  return 0;
}

// DDP on a 4-layer MLP with tiny buckets (several per step): buckets start during backward,
// early accumulation micro-steps communicate nothing, and gradients equal the sum over ranks.
int ddp() {
  auto comm = dist::init_from_env(gloo());
  const int n = comm->size();
  at::manual_seed(1 + comm->rank());  // different initial weights: setup must broadcast
  auto net = torch::nn::Sequential(torch::nn::Linear(16, 64), torch::nn::Linear(64, 64),
                                   torch::nn::Linear(64, 64), torch::nn::Linear(64, 4));
  StrategyConfig sc;
  sc.accumulation = 3;
  sc.sharding.mode = "ddp";
  sc.sharding.bucket_mb = 0.01;  // ~10 KiB: a bucket or two per layer
  Engine engine(EngineOptions{sc, 0.0}, comm);
  auto opt = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  engine.setup(net.ptr(), opt);
  auto& ddp = dynamic_cast<dist::DataParallel&>(engine.sharding());
  // Every rank's parameters are now rank 0's.
  for (const auto& p : net->parameters()) {
    at::Tensor mine = p.detach().clone();
    at::Tensor max = mine.clone(), min = -mine;
    comm->all_reduce(max, dist::Reduce::kMax);
    comm->all_reduce(min, dist::Reduce::kMax);
    require(at::equal(max, mine) && at::equal(-min, mine), "parameters broadcast from rank 0");
  }
  comm->reset_traffic();
  // One step over a global batch of 6 samples per rank (3 micro-batches of 2).
  at::manual_seed(100 + comm->rank());
  at::Tensor x = at::randn({6, 16}), y = at::randn({6, 4});
  at::Tensor w_before = net->parameters().front().detach().clone();
  StepStats st = engine.step(Batch{x, y}, [&](const Batch& mb) {
    return (net->forward(mb.x) - mb.y).pow(2).sum();
  });
  const auto traffic = comm->traffic();
  const int64_t buckets = ddp.bucket_count();
  // Per step: the target count and the loss (2 scalars) + one all-reduce per bucket, and no
  // more: the 2 first micro-steps communicate nothing.
  require(traffic.at("all_reduce").calls == buckets + 2, "all-reduces per step");
  require(buckets >= 4, "several buckets");
  // Bytes: every fp32 gradient once, plus the two fp64 scalars.
  int64_t numel = 0;
  for (const auto& p : net->parameters()) numel += p.numel();
  require(traffic.at("all_reduce").payload_bytes == 4 * numel + 2 * 8, "all-reduce payload");
  // Overlap: every bucket starts inside backward, as soon as its last gradient is in.
  require(ddp.launched_during_backward() == buckets, "every bucket launched during backward");
  // The update equals SGD on the mean gradient over every rank's samples: check through the
  // loss, summed over ranks by the engine (the same on every rank).
  at::Tensor loss_check = at::full({1}, st.loss, at::kDouble);
  at::Tensor loss_max = loss_check.clone();
  comm->all_reduce(loss_max, dist::Reduce::kMax);
  require(loss_max.item<double>() == st.loss, "the same step loss on every rank");
  require(!at::equal(w_before, net->parameters().front()), "parameters moved");
  if (comm->is_main()) {
    std::cout << json{{"world", n}, {"buckets", buckets},
                      {"launched_during_backward", ddp.launched_during_backward()},
                      {"loss", st.loss}, {"traffic", traffic_json(*comm)}}.dump()
              << std::endl;
  }
  return 0;
}

int stuck() {
  auto comm = dist::init_from_env(gloo(/*timeout_s=*/3));
  if (comm->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(30));  // never joins the all-reduce
    return 0;
  }
  at::Tensor t = at::ones({4});
  comm->all_reduce(t);  // must throw within ~3 s
  return 0;
}

int env() {
  const dist::RankInfo i = dist::rank_info_from_env();
  std::cout << json{{"rank", i.rank}, {"world_size", i.world_size}, {"local_rank", i.local_rank},
                    {"local_world_size", i.local_world_size}, {"launcher", i.launcher},
                    {"master_addr", i.master_addr}, {"master_port", i.master_port}}
                   .dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "collectives") return collectives();
    if (scenario == "ddp") return ddp();
    if (scenario == "stuck") return stuck();
    if (scenario == "env") return env();
    std::cerr << "usage: frugal_dist_worker collectives|ddp|stuck|env\n";
    return 64;
  } catch (const frugal::Error& e) {
    std::cerr << "worker error: " << e.what() << std::endl;
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "worker failure: " << e.what() << std::endl;
    return 4;
  }
}
