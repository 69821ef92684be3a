// TensorBoard event files: scalars, text and histograms that `tensorboard --logdir DIR` shows,
// written by frugal's own loop (train.tensorboard, through MetricsRecorder) or by embedding
// code with a loop of its own.
//
// A file is a sequence of TFRecords (length, masked CRC-32C of the length, an `Event` protocol
// buffer, masked CRC-32C of it), the first Event naming the format ("brain.Event:2"). The
// protocol buffers are generated from frugal's own schema (src/train/tensorboard/event.proto);
// none of that shows here, so embedding code needs no protobuf headers.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace frugal {

// CRC-32C (Castagnoli), and the masked form TFRecord stores (a CRC of data that holds CRCs is
// itself easy to get wrong, hence the rotation and constant).
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

class TensorBoardWriter {
 public:
  // Starts `dir`/events.out.tfevents.<unix time>.<hostname><file_suffix> (dir is created).
  // TensorBoard merges the files of one directory into one run, so a directory is one writer's
  // (one rank's). keep_up_to_step >= 0 (a resumed run): the event files already in `dir` are
  // first rewritten without their events past that step, so the resumed steps are not there
  // twice.
  explicit TensorBoardWriter(const std::filesystem::path& dir, const std::string& file_suffix = "",
                             int64_t keep_up_to_step = -1);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Scalars are float32 in the format (Summary.Value.simple_value).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several tags at one step, in one event.
  void add_scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step);
  // Markdown for TensorBoard's text plugin (a string tensor).
  void add_text(const std::string& tag, const std::string& markdown, int64_t step);
  // The values' distribution in `bins` equal-width buckets between their min and max, with
  // their count, sum and sum of squares; any device and floating dtype.
  void add_histogram(const std::string& tag, const at::Tensor& values, int64_t step,
                     int64_t bins = 30);
  // Written records reach the file (the writer flushes after each step's records, so a crash
  // keeps what was logged).
  void flush();
  const std::filesystem::path& file() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Per-module figures of a model at one step, for each module that holds parameters directly
// (named by its path, "blocks.0.attn.qkv"; "(root)" for the model's own): a histogram
// of its parameter values `params/<module>` and their L2 norm `param_norm/<module>`. The whole
// parameters must be in place (under zero3: inside a FullParameters scope, which every rank
// joins).
void add_module_histograms(TensorBoardWriter& writer, const torch::nn::Module& model,
                           int64_t step);

// The L2 norm of each module's gradients (modules as above; those without a defined gradient
// left out). Gradients are final only between Engine::forward_backward and optimizer_step,
// which zeroes them: read them there.
std::map<std::string, double> module_grad_norms(const torch::nn::Module& model);

}  // namespace frugal
