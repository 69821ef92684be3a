// One rank of a multi-process test, started by `frugal launch`, mpirun or torchrun with the
// launcher's environment. Each scenario checks its results itself and exits non-zero (with a
// message on stderr) when one is wrong; rank 0 prints a one-line JSON report on stdout.
//   frugal_dist_worker collectives      all_reduce / broadcast / all_gather / reduce_scatter
//   frugal_dist_worker ddp              DDP on an MLP: overlap, no-sync micro-steps, traffic
//   frugal_dist_worker zero             zero1/2/3 against one process: parameters, memory,
//                                       traffic, gathered bytes
//   frugal_dist_worker stuck            rank 1 skips a collective: the others must time out
//   frugal_dist_worker env              prints this rank's RankInfo as JSON
//   frugal_dist_worker masked           padded / packed Llama batches with ignored targets
//                                       under ddp and zero3 (masked.cpp)
//   frugal_dist_worker checkpoint_io save|save_whole|load DIR
//                                       zero3 checkpoints' host memory and file reads
//                                       (checkpoint_io.cpp)
#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "frugal/distributed/communicator.h"
#include "frugal/distributed/ddp.h"
#include "frugal/distributed/zero_sharding.h"
#include "frugal/engine/engine.h"
#include "frugal/strategy/offload.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"
#include "frugal/util/process_exit.h"
#include "scenarios.h"
#include "support/model_configs.h"

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
  // With offload.optimizer and no clipping, each bucket's parameters are stepped on the host
  // as soon as its all-reduce is done, during backward: the same parameters as without.
  // The same with DDP handed in code (Engine::set_sharding) while strategy.sharding.mode stays
  // "none": the engine must ask the sharding, not the config, whether gradients live in its
  // buckets (dropping them would leave the buckets stale and the ranks drifting apart).
  // The optimizer state on disk (each rank its own scratch file): the same parameters too.
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / fmt::format("frugal-worker-{}", ::getpid());
  std::filesystem::create_directories(scratch);
  auto offloaded_run = [&](OptimizerPlace offload, bool ddp_in_code, int64_t* pipelined) {
    at::manual_seed(1);
    auto mlp = torch::nn::Sequential(torch::nn::Linear(16, 64), torch::nn::Linear(64, 64),
                                     torch::nn::Linear(64, 4));
    StrategyConfig o;
    o.accumulation = 2;
    o.sharding.mode = ddp_in_code ? "none" : "ddp";
    o.sharding.bucket_mb = 0.01;
    o.offload.optimizer = offload;
    o.offload.nvme_path = scratch.string();
    o.offload.buffer_mb = 0.01;
    Engine e(EngineOptions{o, 0.0}, comm);
    if (ddp_in_code) e.set_sharding(std::make_shared<dist::DataParallel>(comm, 0.01));
    e.setup(mlp.ptr(), std::make_shared<torch::optim::SGD>(
                           mlp->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)));
    at::manual_seed(200 + comm->rank());
    for (int s = 0; s < 3; ++s) {
      at::Tensor xs = at::randn({4, 16}), ys = at::randn({4, 4});
      e.step(Batch{xs, ys}, [&](const Batch& mb) { return (mlp->forward(mb.x) - mb.y).pow(2).sum(); });
    }
    if (pipelined != nullptr) *pipelined = e.offload()->pipelined_last_step();
    return mlp->parameters();
  };
  int64_t pipelined = 0, pipelined_in_code = 0;
  const auto plain_params = offloaded_run(false, false, nullptr);
  const auto offloaded_params = offloaded_run(true, false, &pipelined);
  const auto in_code_params = offloaded_run(true, true, &pipelined_in_code);
  const auto nvme_params = offloaded_run(OptimizerPlace::nvme, false, nullptr);
  std::filesystem::remove_all(scratch);
  for (size_t i = 0; i < plain_params.size(); ++i) {
    require(at::equal(plain_params[i], nvme_params[i]), "ddp with the optimizer state on disk");
    require(at::equal(plain_params[i], offloaded_params[i]), "ddp with a pipelined offload step");
    require(at::equal(plain_params[i], in_code_params[i]),
            "ddp set in code, offload on, sharding.mode none: the plain ddp run's parameters");
  }
  require(pipelined_in_code == pipelined, "ddp set in code: the same pipelined hand-overs");
  require(pipelined == static_cast<int64_t>(plain_params.size()),
          "every parameter handed to the host as its bucket finished");
  if (comm->is_main()) {
    std::cout << json{{"world", n}, {"buckets", buckets},
                      {"launched_during_backward", ddp.launched_during_backward()},
                      {"loss", st.loss}, {"traffic", traffic_json(*comm)},
                      {"offload_pipelined", pipelined}}.dump()
              << std::endl;
  }
  return 0;
}

// zero1, zero2 and zero3 on a small GPT, with and without accumulation and checkpointing,
// against one process training on the whole global batch (computed by every rank itself):
// the parameters after 4 steps agree within 1e-5 (fp32; only the order of summation
// differs). AdamW with weight decay (two parameter groups) and active clipping (the global
// norm across shards). Also checks, per mode: the state each rank keeps against ZeRO's
// formula, the bytes sent per step against 2Ψ / 3Ψ, and zero3's gathered bytes.
int zero() {
  auto comm = dist::init_from_env(gloo());
  const int n = comm->size(), r = comm->rank();
  const ModelConfig mc = test::transformer_config("gpt", 3, 2, 32, 16, 64);
  OptimConfig oc;
  oc.lr = 3e-3;
  oc.weight_decay = 0.1;
  const double clip = 0.5;
  const int64_t steps = 4, global = 8;
  at::manual_seed(7);
  const at::Tensor data = at::randint(64, {steps, global, 17}, at::kLong);
  auto batch = [&](int64_t step, int64_t from, int64_t count) {
    at::Tensor rows = data[step].narrow(0, from, count);
    return Batch{rows.narrow(1, 0, 16).contiguous(), rows.narrow(1, 1, 16).contiguous()};
  };
  struct Run {
    std::shared_ptr<Model> model;
    std::unique_ptr<Engine> engine;
  };
  auto build = [&](const StrategyConfig& sc, std::shared_ptr<dist::Communicator> c,
                   double clip_norm = -1) {
    if (clip_norm < 0) clip_norm = clip;
    at::manual_seed(3);
    Run run;
    run.model = make_model(mc);
    run.engine = std::make_unique<Engine>(EngineOptions{sc, clip_norm}, std::move(c));
    run.engine->setup(run.model, make_optimizer(oc, *run.model));
    return run;
  };
  auto loss_of = [](Run& run) {
    return [&run](const Batch& mb) { return run.model->loss_sum(run.model->forward(mb.x), mb.y); };
  };
  // The reference: one process, the whole batch.
  Run ref = build(StrategyConfig{}, nullptr);
  for (int64_t s = 0; s < steps; ++s) ref.engine->step(batch(s, 0, global), loss_of(ref));
  std::map<std::string, at::Tensor> expected;
  int64_t psi = 0, psi_root = 0;  // all parameters; those outside the blocks
  for (const auto& p : ref.model->named_parameters()) {
    expected[p.key()] = p.value().detach().clone();
    psi += p.value().numel();
    if (p.key().rfind("blocks.", 0) != 0) psi_root += p.value().numel();
  }

  struct Variant {
    std::string name;
    int64_t accumulation;
    std::string checkpointing;
    bool accumulate_sharded;
  };
  const std::vector<Variant> variants = {{"plain", 1, "none", true},
                                         {"accumulation", 2, "none", true},
                                         {"checkpointing", 1, "full", true},
                                         {"accumulation+checkpointing", 2, "full", true},
                                         {"accumulation-unsharded", 2, "none", false}};
  json report = {{"world", n}, {"psi", psi}};
  for (const std::string mode : {"zero1", "zero2", "zero3"}) {
    for (const Variant& v : variants) {
      StrategyConfig sc;
      sc.accumulation = v.accumulation;
      sc.checkpointing.policy = v.checkpointing;
      sc.sharding.mode = mode;
      sc.sharding.accumulate_sharded = v.accumulate_sharded;
      Run run = build(sc, comm);
      auto& zs = dynamic_cast<dist::ZeroSharding&>(run.engine->sharding());
      const int64_t per_rank = global / n;
      for (int64_t s = 0; s < steps; ++s) {
        if (s == steps - 1) comm->reset_traffic();
        run.engine->step(batch(s, r * per_rank, per_rank), loss_of(run));
      }
      const auto traffic = comm->traffic();
      const int64_t peak_gathered = zs.peak_gathered_bytes();  // in the last step
      double worst = 0;
      {
        FullParameters full(zs);
        for (const auto& p : run.model->named_parameters()) {
          worst = std::max(worst, (p.value().detach() - expected.at(p.key())).abs().max().item<double>());
        }
      }
      const std::string key = std::string(mode) + "/" + v.name;
      report["max_diff"][key] = worst;
      require(worst < 1e-5, key + ": parameters equal one process's (max diff " +
                                std::to_string(worst) + ")");
      if (v.name != "plain") continue;
      // Traffic of the last step: gathers and reduce-scatters of the padded flat buffers.
      const double ring = (n - 1.0) / n;
      const int64_t gathered = traffic.count("all_gather") ? traffic.at("all_gather").sent_bytes : 0;
      const int64_t reduced =
          traffic.count("reduce_scatter") ? traffic.at("reduce_scatter").sent_bytes : 0;
      // zero1/2: 2Ψ. zero3: 3Ψ for the blocks (gathered for forward and again for backward),
      // 2Ψ for the root unit, which stays gathered from its forward to its backward.
      const double passes =
          std::string(mode) == "zero3" ? 3.0 * (psi - psi_root) + 2.0 * psi_root : 2.0 * psi;
      const double theory = ring * 4.0 * passes;
      const double sent = static_cast<double>(gathered + reduced);
      report["sent_ratio"][mode] = n > 1 ? sent / theory : 0.0;
      if (n > 1) {
        // Padding adds at most world-1 elements per flat buffer.
        require(sent >= theory && sent <= theory * 1.01,
                key + ": bytes sent per step " + std::to_string(sent) + " vs theory " +
                    std::to_string(theory));
      }
      // State kept between steps: fp32 parameters (4), gradients (4), AdamW moments (8) per
      // parameter, each divided by n where sharded (moments read from the optimizer).
      int64_t moments = 0;
      for (const auto& [impl, state] : run.engine->optimizer().state()) {
        (void)impl;
        auto& adam = static_cast<torch::optim::AdamWParamState&>(*state);
        moments += static_cast<int64_t>(adam.exp_avg().nbytes() + adam.exp_avg_sq().nbytes());
      }
      const double held = static_cast<double>(zs.sharded_state_bytes() + moments);
      const int stage = zs.stage();
      const double whole = stage == 1 ? 8.0 : stage == 2 ? 4.0 : 0.0;
      const double formula = (whole + (16.0 - whole) / n) * static_cast<double>(psi);
      report["state_ratio"][mode] = held / formula;
      require(held <= formula * 1.10 && held >= formula * 0.99,
              key + ": state per rank " + std::to_string(held) + " vs ZeRO formula " +
                  std::to_string(formula));
      if (stage == 3) {
        report["peak_gathered_bytes"] = peak_gathered;
        // ZeRO-3's "one unit's full parameters": at most the root unit (kept from its forward
        // to its backward) and two blocks (the one computing and the one prefetched), fp32;
        // never the whole model.
        const int64_t block = (psi - psi_root) / mc.n_layer;
        require(peak_gathered == 4 * (psi_root + 2 * block),
                "zero3 gathers the root and two blocks at most (" + std::to_string(peak_gathered) +
                    " bytes)");
      }
    }
  }
  if (n == 4) {
    // hsdp: zero3 within groups of 2 ranks, replicated over the 2 groups; gradients
    // reduce-scattered within a group, then the shards all-reduced across the groups.
    for (const Variant& v : variants) {
      StrategyConfig sc;
      sc.accumulation = v.accumulation;
      sc.checkpointing.policy = v.checkpointing;
      sc.sharding.mode = "hsdp";
      sc.sharding.shard_size = 2;
      sc.sharding.accumulate_sharded = v.accumulate_sharded;
      Run run = build(sc, comm);
      auto& zs = dynamic_cast<dist::ZeroSharding&>(run.engine->sharding());
      require(zs.shard_group()->size() == 2 && zs.replica_group() && zs.replica_group()->size() == 2,
              "hsdp: groups of 2, 2 replicas");
      const int64_t per_rank = global / n;
      for (int64_t s = 0; s < steps; ++s) {
        if (s == steps - 1) {
          zs.shard_group()->reset_traffic();
          zs.replica_group()->reset_traffic();
        }
        run.engine->step(batch(s, r * per_rank, per_rank), loss_of(run));
      }
      const auto within = zs.shard_group()->traffic();
      const auto across = zs.replica_group()->traffic();
      double worst = 0;
      {
        FullParameters full(zs);
        for (const auto& p : run.model->named_parameters()) {
          worst = std::max(worst, (p.value().detach() - expected.at(p.key())).abs().max().item<double>());
        }
      }
      const std::string key = "hsdp/" + v.name;
      report["max_diff"][key] = worst;
      require(worst < 1e-5, key + ": parameters equal one process's (max diff " +
                                std::to_string(worst) + ")");
      if (v.name != "plain") continue;
      // Within a group of 2: zero3's traffic at world 2. Across the 2 groups: each rank's
      // gradient shard (half the model) all-reduced, 2(R-1)/R = 1 x its bytes.
      auto sent = [](const std::map<std::string, dist::Traffic>& t, const char* op) {
        return t.count(op) ? static_cast<double>(t.at(op).sent_bytes) : 0.0;
      };
      const double in_group = sent(within, "all_gather") + sent(within, "reduce_scatter");
      const double in_theory = 0.5 * 4.0 * (3.0 * (psi - psi_root) + 2.0 * psi_root);
      const double across_theory = 4.0 * static_cast<double>(psi) / 2.0;
      report["hsdp_sent_ratio"]["within"] = in_group / in_theory;
      report["hsdp_sent_ratio"]["across"] = sent(across, "all_reduce") / across_theory;
      require(in_group >= in_theory && in_group <= in_theory * 1.01,
              "hsdp: bytes sent within a group " + std::to_string(in_group) + " vs " +
                  std::to_string(in_theory));
      require(sent(across, "all_reduce") >= across_theory &&
                  sent(across, "all_reduce") <= across_theory * 1.01,
              "hsdp: bytes sent across groups " + std::to_string(sent(across, "all_reduce")) +
                  " vs " + std::to_string(across_theory));
    }
  }
  // Policies, each against a reference trained the same way in one process.
  auto sharded_run = [&](const StrategyConfig& sc, const std::map<std::string, at::Tensor>& want,
                         int64_t& peak, int64_t& units) {
    Run run = build(sc, comm);
    auto& f = dynamic_cast<dist::ZeroSharding&>(run.engine->sharding());
    const int64_t per_rank = global / n;
    for (int64_t s = 0; s < steps; ++s)
      run.engine->step(batch(s, r * per_rank, per_rank), loss_of(run));
    peak = f.peak_gathered_bytes();
    units = f.unit_count();
    FullParameters full(f);
    double worst = 0;
    for (const auto& p : run.model->named_parameters()) {
      worst = std::max(worst, (p.value().detach().to(at::kFloat) - want.at(p.key())).abs().max().item<double>());
    }
    return worst;
  };
  int64_t peak_fp32 = 0, units_block = 0;
  {
    // wrap: size with a large unit_mb merges the three blocks into one unit (+ the root).
    StrategyConfig sc;
    sc.sharding.mode = "zero3";
    sc.sharding.wrap = "size";
    sc.sharding.unit_mb = 1000;
    int64_t peak = 0, units = 0;
    const double worst = sharded_run(sc, expected, peak, units);
    report["max_diff"]["zero3/wrap-size"] = worst;
    report["units"]["size"] = units;
    require(worst < 1e-5, "zero3 wrap size: parameters equal one process's");
    require(units == 2, "wrap size merges the blocks into one unit");
    sc.sharding.wrap = "block";
    (void)sharded_run(sc, expected, peak_fp32, units_block);
    report["units"]["block"] = units_block;
    require(units_block == 4, "wrap block: one unit per block, and the root");
  }
  {
    // bf16-mixed precision composes with zero2 and zero3. bf16 rounding depends on how the
    // batch is cut, and Adam turns tiny gradient differences into steps of up to lr, so the
    // yardstick is one process cutting its batch the same way (accumulation = ranks, at least
    // 2: at world 1 the flat buffers' different summation order is such a cut too): the
    // sharded runs must not stray further from the whole-batch run than twice that.
    StrategyConfig sc;
    sc.precision = "bf16-mixed";
    auto single = [&](int64_t accumulation) {
      StrategyConfig one = sc;
      one.accumulation = accumulation;
      Run run = build(one, nullptr);
      for (int64_t s = 0; s < steps; ++s) run.engine->step(batch(s, 0, global), loss_of(run));
      std::map<std::string, at::Tensor> params;
      for (const auto& p : run.model->named_parameters()) params[p.key()] = p.value().detach().clone();
      return params;
    };
    const auto want = single(1);
    double yardstick = 0;
    for (const auto& [k, v] : single(std::max(n, 2))) {
      yardstick = std::max(yardstick, (v - want.at(k)).abs().max().item<double>());
    }
    report["bf16_cut_diff"] = yardstick;
    for (const std::string mode : {"zero2", "zero3"}) {
      sc.sharding.mode = mode;
      int64_t peak = 0, units = 0;
      const double worst = sharded_run(sc, want, peak, units);
      report["max_diff"][mode + "/bf16-mixed"] = worst;
      require(worst <= std::max(2 * yardstick, 1e-5),
              mode + " with bf16-mixed: parameters as near one process's as a cut batch (max diff " +
                  std::to_string(worst) + ", yardstick " + std::to_string(yardstick) + ")");
    }
  }
  {
    // param_dtype bf16 (reduce in fp32): units are gathered in bf16, half the bytes; the fp32
    // shards train close to the fp32 reference.
    StrategyConfig sc;
    sc.sharding.mode = "zero3";
    sc.sharding.param_dtype = "bf16";
    sc.sharding.reduce_dtype = "fp32";
    int64_t peak = 0, units = 0;
    const double worst = sharded_run(sc, expected, peak, units);
    report["max_diff"]["zero3/param-bf16"] = worst;
    report["peak_gathered_bytes_bf16"] = peak;
    require(peak * 2 == peak_fp32, "param_dtype bf16 gathers half the bytes of fp32");
    require(worst < 5e-2, "param_dtype bf16: parameters near the fp32 reference");
  }
  {
    // A scratch directory for the optimizer state on disk (each rank's file its own).
    const std::filesystem::path scratch =
        std::filesystem::temp_directory_path() / fmt::format("frugal-worker-{}", ::getpid());
    std::filesystem::create_directories(scratch);
    struct Removed {
      std::filesystem::path dir;
      ~Removed() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } removed{scratch};
    // Offload composes with sharding: each rank's shard steps on the host (host to host
    // here), bit for bit as without offload.
    int64_t pipelined = 0;
    auto params_of = [&](const StrategyConfig& sc, double clip_norm) {
      Run run = build(sc, comm, clip_norm);
      const int64_t per_rank = global / n;
      for (int64_t s = 0; s < steps; ++s) run.engine->step(batch(s, r * per_rank, per_rank), loss_of(run));
      pipelined = run.engine->offload() ? run.engine->offload()->pipelined_last_step() : 0;
      FullParameters full(run.engine->sharding());
      std::map<std::string, at::Tensor> out;
      for (const auto& p : run.model->named_parameters()) out[p.key()] = p.value().detach().clone();
      return out;
    };
    auto same_params = [](const std::map<std::string, at::Tensor>& a,
                          const std::map<std::string, at::Tensor>& b) {
      bool equal = true;
      for (const auto& [k, v] : a) equal = equal && at::equal(v, b.at(k));
      return equal;
    };
    {
      // zero1: whole gradients on every rank, each rank's optimizer shard on the host or on
      // disk.
      StrategyConfig sc;
      sc.sharding.mode = "zero1";
      sc.accumulation = 2;
      const auto plain = params_of(sc, clip);
      sc.offload.optimizer = true;
      const bool in_ram = same_params(plain, params_of(sc, clip));
      require(in_ram, "zero1 with offload.optimizer: the same parameters as without");
      report["offload_exact"]["zero1/optimizer"] = in_ram;
      sc.offload.optimizer = OptimizerPlace::nvme;
      sc.offload.nvme_path = scratch.string();
      sc.offload.buffer_mb = 0.02;
      const bool on_disk = same_params(plain, params_of(sc, clip));
      require(on_disk, "zero1 with the optimizer state on disk: the same parameters");
      report["offload_exact"]["zero1/nvme"] = on_disk;
    }
    for (const std::string mode : {"zero2", "zero3"}) {
      StrategyConfig sc;
      sc.sharding.mode = mode;
      sc.accumulation = 2;
      const auto plain = params_of(sc, clip);
      sc.offload.optimizer = true;
      const auto offloaded = params_of(sc, clip);
      bool equal = true;
      for (const auto& [k, v] : plain) equal = equal && at::equal(v, offloaded.at(k));
      require(equal, mode + " with offload.optimizer: the same parameters as without");
      report["offload_exact"][mode + "/optimizer"] = equal;
      // The masters and state of this rank's shards on disk, in its own scratch file.
      sc.offload.optimizer = OptimizerPlace::nvme;
      sc.offload.nvme_path = scratch.string();
      sc.offload.buffer_mb = 0.02;
      const auto on_disk = params_of(sc, clip);
      bool same_on_disk = true;
      for (const auto& [k, v] : plain) same_on_disk = same_on_disk && at::equal(v, on_disk.at(k));
      require(same_on_disk, mode + " with the optimizer state on disk: the same parameters");
      report["offload_exact"][mode + "/nvme"] = same_on_disk;
      sc.offload.optimizer = true;
      // Without clipping the host steps each unit's shards as soon as they are reduced,
      // while backward goes on: still the same parameters.
      sc.offload.optimizer = false;
      const auto plain_unclipped = params_of(sc, 0.0);
      sc.offload.optimizer = true;
      const auto overlapped = params_of(sc, 0.0);
      bool same_overlapped = true;
      for (const auto& [k, v] : plain_unclipped) same_overlapped = same_overlapped && at::equal(v, overlapped.at(k));
      require(same_overlapped, mode + " with a pipelined offload step: the same parameters");
      require(pipelined > 0, mode + ": shards were stepped during backward");
      report["offload_exact"][mode + "/pipelined"] = same_overlapped;
      report["offload_pipelined_shards"][mode] = pipelined;
      if (mode == "zero3") {
        sc.offload.params = true;
        const auto host_shards = params_of(sc, clip);
        bool same = true;
        for (const auto& [k, v] : plain) same = same && at::equal(v, host_shards.at(k));
        require(same, "zero3 with offload.params: the same parameters as without");
        report["offload_exact"]["zero3/params"] = same;
        sc.offload.optimizer = OptimizerPlace::nvme;  // the shards on the host, their state on disk
        const auto host_and_disk = params_of(sc, clip);
        bool same_both = true;
        for (const auto& [k, v] : plain) same_both = same_both && at::equal(v, host_and_disk.at(k));
        require(same_both, "zero3 with offload.params and the state on disk: the same parameters");
        report["offload_exact"]["zero3/params+nvme"] = same_both;
      }
    }
    if (n == 4) {
      // hsdp (2 groups of 2) with its shards' optimizer on the host, and with the shards
      // themselves there: bit for bit as without.
      StrategyConfig sc;
      sc.sharding.mode = "hsdp";
      sc.sharding.shard_size = 2;
      sc.accumulation = 2;
      const auto plain = params_of(sc, clip);
      sc.offload.optimizer = true;
      const bool optimizer_host = same_params(plain, params_of(sc, clip));
      require(optimizer_host, "hsdp with offload.optimizer: the same parameters as without");
      report["offload_exact"]["hsdp/optimizer"] = optimizer_host;
      sc.offload.params = true;
      const bool params_host = same_params(plain, params_of(sc, clip));
      require(params_host, "hsdp with offload.params: the same parameters as without");
      report["offload_exact"]["hsdp/params"] = params_host;
    }
  }
  {
    // fp16-mixed with a scale high enough that early steps overflow: the ranks hold different
    // shards of the gradients, yet agree on every skip, and the scale and the parameters
    // follow one process's. Whether a step overflows depends on how many samples one fp16
    // matmul sums, so that process cuts its batch as the ranks do (accumulation = ranks).
    StrategyConfig sc;
    sc.precision = "fp16-mixed";
    auto trajectory = [&](Run& run, int64_t from, int64_t count) {
      std::vector<double> scales;
      int64_t skipped = 0;
      for (int64_t s = 0; s < steps; ++s) {
        StepStats st = run.engine->step(batch(s, from, count), loss_of(run));
        scales.push_back(st.loss_scale);
        skipped += st.skipped ? 1 : 0;
      }
      return std::make_pair(scales, skipped);
    };
    // The initial scale: the largest power of two at which the reference skips some steps
    // but not all (every rank finds the same one: the reference runs alike everywhere).
    StrategyConfig cut = sc;
    cut.accumulation = n;
    std::unique_ptr<Run> one;
    std::vector<double> want_scales;
    int64_t want_skipped = 0;
    for (int e = 40; e >= 8 && (want_skipped == 0 || want_skipped == steps); --e) {
      cut.grad_scaler.init_scale = std::ldexp(1.0, e);
      one = std::make_unique<Run>(build(cut, nullptr));
      std::tie(want_scales, want_skipped) = trajectory(*one, 0, global);
      sc.grad_scaler.init_scale = cut.grad_scaler.init_scale;
    }
    sc.sharding.mode = "zero2";
    Run run = build(sc, comm);
    const auto [scales, skipped] = trajectory(run, r * (global / n), global / n);
    report["fp16_skipped"] = skipped;
    require(want_skipped > 0 && want_skipped < steps,
            "the fp16 scale overflows some steps, not all (skipped " + std::to_string(want_skipped) + ")");
    require(skipped == want_skipped && scales == want_scales,
            "zero2 fp16-mixed: the same skips and scales as one process");
    double worst = 0;
    for (const auto& p : run.model->named_parameters()) {
      const auto& q = one->model->named_parameters()[p.key()];
      worst = std::max(worst, (p.value().detach() - q.detach()).abs().max().item<double>());
    }
    report["max_diff"]["zero2/fp16-mixed"] = worst;
    require(worst < 5e-2, "zero2 fp16-mixed: parameters near one process's");
  }
  if (comm->is_main()) std::cout << report.dump() << std::endl;
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

int run_scenario(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "collectives") return collectives();
    if (scenario == "ddp") return ddp();
    if (scenario == "zero") return zero();
    if (scenario == "stuck") return stuck();
    if (scenario == "env") return env();
    if (scenario == "masked") return frugal::test_worker::masked();
    if (scenario == "checkpoint_io" && argc == 4) {
      return frugal::test_worker::checkpoint_io(argv[2], argv[3]);
    }
    std::cerr << "usage: frugal_dist_worker collectives|ddp|zero|stuck|env|masked|checkpoint_io\n";
    return 64;
  } catch (const frugal::Error& e) {
    std::cerr << "worker error: " << e.what() << std::endl;
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "worker failure: " << e.what() << std::endl;
    return 4;
  }
}

}  // namespace

int main(int argc, char** argv) { frugal::exit_process(run_scenario(argc, argv)); }
