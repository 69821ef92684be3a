// optim.in_backward (strategy/in_backward_update.h): every parameter is stepped during backward
// as its gradient becomes final, and the gradient freed. The parameters after 3 AdamW steps
// equal the plain step's bit for bit (with accumulation too), every parameter was stepped
// early, the reported gradient norm is the plain step's, and the step's peak memory drops by
// most of the gradients' bytes.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <iostream>

#include "frugal/engine/engine.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/in_backward_update.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

struct InBackwardRun {
  std::vector<at::Tensor> params;
  std::vector<double> norms;
  int64_t stepped = 0;
  int64_t peak = 0;  // the tracker's peak over the last step, above what was live before it
};

InBackwardRun train(bool in_backward, int64_t accumulation, const std::string& optimizer) {
  at::manual_seed(21);
  // n_embd 256: parameters dominate the step's memory at this batch.
  auto model = make_model(test::transformer_config("gpt", 2, 4, 256, 8, 512));
  OptimConfig oc;
  oc.type = optimizer;
  oc.lr = 1e-3;
  oc.weight_decay = 0.1;
  StrategyConfig sc;
  sc.accumulation = accumulation;
  Engine engine(EngineOptions{sc, 0.0, in_backward});
  engine.setup(model, make_optimizer(oc, *model));
  InBackwardRun run;
  at::manual_seed(22);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor seq = at::randint(0, 512, {2, 9}, at::kLong);
    const Batch b{seq.narrow(1, 0, 8).contiguous(), seq.narrow(1, 1, 8).contiguous()};
    const int64_t before = memory::cpu_counters().current_bytes;
    memory::reset_cpu_peak();
    const StepStats st =
        engine.step(b, [&](const Batch& mb) { return model->batch_loss_sum(mb); });
    run.peak = memory::cpu_counters().peak_bytes - before;
    run.norms.push_back(st.grad_norm);
  }
  if (auto* u = dynamic_cast<const InBackwardUpdate*>(engine.update())) run.stepped = u->stepped_in_backward();
  for (const auto& p : model->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

}  // namespace

TEST_CASE("optim.in_backward steps during backward and equals the plain step bit for bit",
          "[unit][engine][in_backward]") {
  memory::install_cpu_tracking();
  for (const std::string optimizer : {"adamw", "sgd"}) {
    for (int64_t accumulation : {1, 2}) {
      INFO(optimizer << ", accumulation " << accumulation);
      const InBackwardRun plain = train(false, accumulation, optimizer);
      const InBackwardRun early = train(true, accumulation, optimizer);
      REQUIRE(plain.params.size() == early.params.size());
      for (size_t i = 0; i < plain.params.size(); ++i) CHECK(at::equal(plain.params[i], early.params[i]));
      CHECK(early.stepped == static_cast<int64_t>(plain.params.size()));
      for (size_t s = 0; s < plain.norms.size(); ++s) {
        CHECK(early.norms[s] == Approx(plain.norms[s]).epsilon(1e-5));
      }
      int64_t grad_bytes = 0;
      for (const auto& p : plain.params) grad_bytes += p.numel() * 4;
      std::cout << optimizer << ", accumulation " << accumulation << ": step peak "
                << plain.peak / 1048576.0 << " MiB plain, " << early.peak / 1048576.0
                << " MiB in backward (gradients " << grad_bytes / 1048576.0 << " MiB)\n";
      // Without accumulation the gradients never all exist at once: most of their bytes are
      // off the peak (the embedding's, the largest, is the last to be final and stays).
      if (accumulation == 1) CHECK(plain.peak - early.peak > grad_bytes / 2);
    }
  }
}
