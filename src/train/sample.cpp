#include "frugal/train/sample.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "frugal/models/gpt.h"
#include "frugal/util/log.h"

namespace frugal {

std::string sample_text(const Config& cfg, Model& model, c10::Device device) {
  auto* gpt = dynamic_cast<Gpt*>(&model);
  if (!gpt || cfg.generate.tokens <= 0) return {};
  if (gpt->options().vocab_size != 256) {
    log::info("generate: skipped (text sampling needs a byte-level model, vocab_size 256)");
    return {};
  }
  std::string prompt = cfg.generate.prompt.empty() ? std::string("\n") : cfg.generate.prompt;
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  for (auto& id : ids) id = static_cast<unsigned char>(id);
  at::Tensor idx = at::tensor(ids, at::kLong).unsqueeze(0).to(device);  // (1, T0)
  // Sampling draws on the model's device: a seeded CPU generator, or CUDA's default one.
  at::Generator gen = device.is_cpu() ? at::make_generator<at::CPUGeneratorImpl>(cfg.run.seed)
                                      : at::globalContext().defaultGenerator(device);
  if (!device.is_cpu()) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(cfg.run.seed);
  }
  at::Tensor out = gpt->generate(idx, cfg.generate.tokens, cfg.generate.temperature,
                                 cfg.generate.top_k, gen);
  std::string text;
  at::Tensor row = out[0].cpu().contiguous();
  auto acc = row.accessor<int64_t, 1>();
  for (int64_t i = static_cast<int64_t>(ids.size()); i < acc.size(0); ++i) {
    text.push_back(static_cast<char>(acc[i]));
  }
  return text;
}

}  // namespace frugal
