// Training your own torch::nn::Module with frugal's engine, in your own loop.
//   embed_example [CONFIG.yaml]
//   frugal launch --nproc-per-node 2 -- embed_example CONFIG.yaml    (e.g. with zero3)
// With a config, its optim:, strategy: and distributed: sections are used; without, they are
// set in code. The model's residual blocks are frugal::Unit modules in a list named "blocks",
// so every strategy applies to them: checkpointing recomputes them, zero3 gathers and frees
// their parameters.
#include <frugal/distributed/communicator.h>
#include <frugal/distributed/env.h>
#include <frugal/frugal.h>
#include <torch/torch.h>

#include <iostream>

// The user's model. Blocks derive from frugal::Unit and put their computation in
// forward_impl; frugal's wrappers run around it.
struct ResidualBlock : frugal::Unit {
  ResidualBlock() { fc = register_module("fc", torch::nn::Linear(32, 32)); }
  at::Tensor forward_impl(const at::Tensor& x) override { return x + torch::tanh(fc(x)); }
  torch::nn::Linear fc{nullptr};
};

struct ResidualNet : torch::nn::Module {
  ResidualNet() {
    in = register_module("in", torch::nn::Linear(8, 32));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < 3; ++i) blocks->push_back(std::make_shared<ResidualBlock>());
    out = register_module("out", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = in(x);
    for (const auto& block : *blocks) x = block->as<ResidualBlock>()->forward(x);
    return out(x);
  }
  torch::nn::Linear in{nullptr}, out{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};

int main(int argc, char** argv) try {
  frugal::OptimConfig optim;
  optim.type = "adamw";
  optim.lr = 1e-2;
  frugal::StrategyConfig strategy;
  strategy.accumulation = 2;
  frugal::DistributedConfig distributed;
  if (argc > 1) {
    frugal::Config cfg = frugal::load_config(argv[1]);
    optim = cfg.optim;
    strategy = cfg.strategy;
    distributed = cfg.distributed;
  }
  // Under a launcher (frugal launch, torchrun, mpirun, Slurm) join the job's process group.
  std::shared_ptr<frugal::dist::Communicator> comm;
  if (frugal::dist::rank_info_from_env().distributed())
    comm = frugal::dist::init_from_env(distributed);
  const bool main_rank = !comm || comm->is_main();

  torch::manual_seed(0);
  auto net = std::make_shared<ResidualNet>();
  frugal::Engine engine(frugal::EngineOptions{strategy, /*clip_grad_norm=*/1.0}, comm);
  engine.mark_blocks({"blocks"});
  engine.setup(net, frugal::make_optimizer(optim, *net));

  // Data: a fixed random teacher the net must learn. Every rank draws the same samples, so
  // the job's mean gradient is one process's, whatever the world size.
  auto teacher = torch::randn({8, 1});
  // The loss function returns the SUM over targets; the engine divides by the job's count.
  // Two losses in one: the fit, and a small penalty on the output's magnitude.
  auto loss_sum = [&](const frugal::Batch& mb) {
    auto y = net->forward(mb.x);
    return torch::mse_loss(y, mb.y, torch::Reduction::Sum) + 1e-3 * y.pow(2).sum();
  };
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto x = torch::randn({32, 8});
    frugal::Batch batch{x, torch::sin(x.matmul(teacher))};
    // The step in two halves: between them every gradient is final (reduced across ranks,
    // unscaled), on the tensors the optimizer steps (this rank's shards under zero1/2/3).
    frugal::StepStats stats = engine.forward_backward(batch, loss_sum);
    double local_sq = 0;
    for (const auto& group : engine.optimizer().param_groups()) {
      for (const auto& p : group.params()) {
        if (p.grad().defined()) local_sq += p.grad().pow(2).sum().item<double>();
      }
    }
    if (step % 50 == 0 && main_rank) {
      std::cout << "step " << step << ": gradient sum of squares on this rank " << local_sq << "\n";
    }
    stats = engine.optimizer_step();  // norm, clipping, update, zeroing
    if (step == 0) first = stats.loss;
    last = stats.loss;
  }
  if (main_rank) std::cout << "first loss " << first << "\nlast loss " << last << std::endl;
  return last < first * 0.5 ? 0 : 1;
} catch (const frugal::Error& e) {
  std::cerr << "embed_example: " << e.what() << "\n";
  return 2;
}
