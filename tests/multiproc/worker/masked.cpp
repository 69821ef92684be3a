// frugal_dist_worker masked: variable-length batches across ranks. A small Llama (GQA) trains
// 3 AdamW steps on padded rows (left and right padding, attention masks, transformers-style
// position ids) and packed rows (position ids restarting inside the row), with a third of the
// real targets and every padding target set to kIgnoreIndex, under
// {ddp, zero3} x {plain, full checkpointing}, accumulation 3, against one process on the whole
// global batch (computed by every rank itself). Checks on every rank:
// - each step's loss equals PyTorch's mean cross-entropy with ignore_index over the global
//   batch (at::cross_entropy_loss, mean), within 1e-6;
// - the step's target count is the global count of targets that are not ignored;
// - the parameters after 3 steps equal one process's within 1e-5.
#include <ATen/ATen.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/models/llama.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/sharding.h"
#include "scenarios.h"
#include "support/model_configs.h"

namespace frugal::test_worker {

namespace {

constexpr int64_t kVocab = 48, kT = 10, kSteps = 3;

// Row i of a step: padded (left or right), packed (two or three documents), or whole.
Batch global_batch(int64_t step, int64_t rows) {
  at::manual_seed(50 + step);
  Batch b;
  b.x = at::randint(1, kVocab, {rows, kT}, at::kLong);
  b.y = at::randint(1, kVocab, {rows, kT}, at::kLong);
  b.attention_mask = at::ones({rows, kT}, at::kLong);
  b.position_ids = at::arange(kT, at::kLong).repeat({rows, 1});
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t len = 4 + (i * 3 + step) % (kT - 3);  // 4..kT real tokens
    at::Tensor mask = b.attention_mask[i], pos = b.position_ids[i];
    switch (i % 4) {
      case 0:  // right padding
        mask.narrow(0, len, kT - len).zero_();
        break;
      case 1:  // left padding, positions as transformers' generate makes them
        mask.narrow(0, 0, kT - len).zero_();
        break;
      case 2:  // packed: documents of len and kT - len tokens
        pos.narrow(0, len, kT - len).copy_(at::arange(kT - len, at::kLong));
        break;
      default:  // one whole document
        break;
    }
    if (i % 4 == 0 || i % 4 == 1) {
      pos.copy_((mask.cumsum(0) - 1).masked_fill(mask == 0, 1));
      b.x[i].masked_fill_(mask == 0, 0);
    }
  }
  b.y.masked_fill_(b.attention_mask == 0, kIgnoreIndex);
  b.y.masked_fill_(at::rand({rows, kT}) < 0.33, kIgnoreIndex);  // a third of the rest
  return b;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

}  // namespace

int masked() {
  DistributedConfig gloo;
  gloo.backend = "gloo";
  gloo.timeout_s = 60;
  auto comm = dist::init_from_env(gloo);
  const int n = comm->size(), r = comm->rank();
  ModelConfig mc = frugal::test::transformer_config("llama", 2, 4, 32, kT, kVocab);
  mc.n_kv_head = 2;
  mc.intermediate_size = 48;
  OptimConfig oc;
  oc.lr = 3e-3;  // as the zero scenario: Adam amplifies summation-order differences by lr
  oc.weight_decay = 0.1;
  const int64_t per_rank = 6, global = per_rank * n;  // 3 micro-batches of 2 per rank

  struct Run {
    std::shared_ptr<Model> model;
    std::unique_ptr<Engine> engine;
  };
  auto build = [&](const StrategyConfig& sc, std::shared_ptr<dist::Communicator> c) {
    at::manual_seed(3);
    Run run;
    run.model = make_model(mc);
    run.engine = std::make_unique<Engine>(EngineOptions{sc, 1.0}, std::move(c));
    run.engine->setup(run.model, make_optimizer(oc, *run.model));
    return run;
  };
  auto train = [&](Run& run, int64_t first, int64_t count, std::vector<StepStats>* stats) {
    for (int64_t s = 0; s < kSteps; ++s) {
      const Batch b = global_batch(s, global).rows(first, count);
      const StepStats st = run.engine->step(b, [&](const Batch& mb) {
        return run.model->loss_sum(run.model->forward_batch(mb), mb.y);
      });
      if (stats) stats->push_back(st);
    }
  };

  // The reference: one process, the whole batch, and PyTorch's mean with ignore_index.
  Run ref = build(StrategyConfig{}, nullptr);
  std::vector<double> torch_means;
  std::vector<int64_t> kept;
  for (int64_t s = 0; s < kSteps; ++s) {
    const Batch b = global_batch(s, global);
    {
      at::NoGradGuard no_grad;
      const at::Tensor logits = ref.model->forward_batch(b);
      torch_means.push_back(at::cross_entropy_loss(logits.reshape({-1, kVocab}), b.y.reshape({-1}),
                                                   {}, at::Reduction::Mean, kIgnoreIndex)
                                .item<double>());
    }
    kept.push_back((b.y != kIgnoreIndex).sum().item<int64_t>());
    ref.engine->step(b, [&](const Batch& mb) { return ref.model->loss_sum(ref.model->forward_batch(mb), mb.y); });
  }
  std::map<std::string, at::Tensor> expected;
  for (const auto& p : ref.model->named_parameters()) expected[p.key()] = p.value().detach().clone();

  nlohmann::json report = {{"world", n}};
  for (const std::string mode : {"ddp", "zero3"}) {
    for (const std::string policy : {"none", "full"}) {
      StrategyConfig sc;
      sc.accumulation = 3;
      sc.sharding.mode = mode;
      sc.checkpointing.policy = policy;
      Run run = build(sc, comm);
      std::vector<StepStats> stats;
      train(run, r * per_rank, per_rank, &stats);
      const std::string key = mode + "/" + policy;
      double loss_diff = 0;
      // Each step's loss is read before its update, on weights equal to the reference's
      // at that step.
      for (int64_t s = 0; s < kSteps; ++s) {
        loss_diff = std::max(loss_diff, std::abs(stats[s].loss - torch_means[s]));
      }
      int64_t targets = 0;
      for (const auto& st : stats) targets += st.targets;
      at::Tensor all = at::full({1}, static_cast<double>(targets), at::kDouble);
      comm->all_reduce(all);
      int64_t want = 0;
      for (int64_t k : kept) want += k;
      require(all.item<double>() == static_cast<double>(want),
              key + ": the steps' target counts are the targets not ignored");
      double worst = 0;
      {
        FullParameters full(run.engine->sharding());
        for (const auto& p : run.model->named_parameters()) {
          worst = std::max(worst, (p.value().detach() - expected.at(p.key())).abs().max().item<double>());
        }
      }
      report["loss_diff"][key] = loss_diff;
      report["max_diff"][key] = worst;
      require(loss_diff < 1e-6, key + ": losses equal PyTorch's mean with ignore_index (diff " +
                                    std::to_string(loss_diff) + ")");
      require(worst < 1e-5, key + ": parameters equal one process's (max diff " +
                                std::to_string(worst) + ")");
    }
  }
  report["ignored_fraction"] =
      1.0 - static_cast<double>(kept[0]) / static_cast<double>(global * kT);
  if (comm->is_main()) std::cout << report.dump() << std::endl;
  return 0;
}

}  // namespace frugal::test_worker
