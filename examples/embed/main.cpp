// Training your own torch::nn::Module with frugal's engine, in your own loop.
//   embed_example [CONFIG.yaml]
// With a config, its optim: and strategy: sections are used; without, they are set in code.
#include <frugal/frugal.h>
#include <torch/torch.h>

#include <iostream>

// The user's model: nothing frugal-specific about it.
struct TwoLayerNet : torch::nn::Module {
  TwoLayerNet() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

int main(int argc, char** argv) try {
  frugal::OptimConfig optim;
  optim.type = "adamw";
  optim.lr = 1e-2;
  frugal::StrategyConfig strategy;
  strategy.accumulation = 2;
  if (argc > 1) {
    frugal::Config cfg = frugal::load_config(argv[1]);
    optim = cfg.optim;
    strategy = cfg.strategy;
  }

  torch::manual_seed(0);
  auto net = std::make_shared<TwoLayerNet>();
  frugal::Engine engine(frugal::EngineOptions{strategy, /*clip_grad_norm=*/1.0});
  engine.setup(net, frugal::make_optimizer(optim, *net));

  // Data: a fixed random teacher the net must learn.
  auto teacher = torch::randn({8, 1});
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto x = torch::randn({32, 8});
    frugal::Batch batch{x, torch::sin(x.matmul(teacher))};
    // The loss function returns the SUM over targets; the engine normalises.
    auto stats = engine.step(batch, [&](const frugal::Batch& mb) {
      return torch::mse_loss(net->forward(mb.x), mb.y, torch::Reduction::Sum);
    });
    if (step == 0) first = stats.loss;
    last = stats.loss;
  }
  std::cout << "first loss " << first << "\nlast loss " << last << "\n";
  return last < first * 0.5 ? 0 : 1;
} catch (const frugal::Error& e) {
  std::cerr << "embed_example: " << e.what() << "\n";
  return 2;
}
