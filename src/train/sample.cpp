#include "frugal/train/sample.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <fmt/format.h>

#include <filesystem>

#include "frugal/data/tokenizer.h"
#include "frugal/models/generate.h"
#include "frugal/util/log.h"

namespace frugal {

namespace fs = std::filesystem;

std::shared_ptr<Tokenizer> sample_tokenizer(const Config& cfg) {
  if (!cfg.generate.tokenizer.empty()) return Tokenizer::load(cfg.generate.tokenizer);
  const fs::path from = cfg.model.init_from;
  if (!from.empty() && has_tokenizer_file(from)) {
    return Tokenizer::load(from);
  }
  return nullptr;
}

std::string sample_text(const Config& cfg, Model& model, c10::Device device,
                        const Tokenizer* tokenizer) {
  if (cfg.generate.tokens <= 0) return {};
  if (!tokenizer && cfg.model.vocab_size != 256) {
    log::info(fmt::format(
        "generate: skipped (set generate.tokenizer: a vocabulary of {} tokens is not bytes)",
        cfg.model.vocab_size));
    return {};
  }
  const std::string prompt = cfg.generate.prompt.empty() ? std::string("\n") : cfg.generate.prompt;
  std::vector<int64_t> ids;
  if (tokenizer) {
    ids = tokenizer->encode(prompt);
  } else {
    for (unsigned char c : prompt) ids.push_back(c);
  }
  at::Tensor idx = at::tensor(ids, at::kLong).unsqueeze(0).to(device);  // (1, T0)
  // Sampling draws on the model's device: a seeded CPU generator, or CUDA's default one.
  at::Generator gen = device.is_cpu() ? at::make_generator<at::CPUGeneratorImpl>(cfg.run.seed)
                                      : at::globalContext().defaultGenerator(device);
  if (!device.is_cpu()) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(cfg.run.seed);
  }
  SamplingOptions options;
  options.new_tokens = cfg.generate.tokens;
  options.temperature = cfg.generate.temperature;
  options.top_k = cfg.generate.top_k;
  options.context = cfg.model.block_size;
  at::Tensor out = sample_tokens(model, idx, options, gen)[0].cpu().contiguous();
  const std::vector<int64_t> drawn(out.data_ptr<int64_t>() + ids.size(),
                                   out.data_ptr<int64_t>() + out.numel());
  if (tokenizer) return tokenizer->decode(drawn);
  std::string bytes;
  for (int64_t id : drawn) bytes.push_back(static_cast<char>(id));
  return bytes;
}

}  // namespace frugal
