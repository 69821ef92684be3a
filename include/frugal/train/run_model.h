// A run's model, built the one way the trainer builds it and export rebuilds it: seeded
// (run.seed) make_model, model.init_from's weights, the fine-tuning settings
// (apply_finetuning: NF4 base, adapters, frozen parameters), model.init_adapter's adapters.
#pragma once

#include <memory>
#include <string>

#include "frugal/config/config.h"
#include "frugal/io/named_tensors.h"
#include "frugal/models/model.h"

namespace frugal {

struct RunModelOptions {
  bool load_init_from = true;     // model.init_from's weights (when set) before fine-tuning
  bool load_init_adapter = true;  // model.init_adapter's adapters (when set) after it
  // Built on the meta device: shapes only, no memory, no initialisation (the caller gives the
  // parameters their tensors: materialize_without_values, then a sharding's load).
  bool on_meta = false;
};

// On the CPU. A model too large for memory is a frugal::Error in the config's terms.
std::shared_ptr<Model> build_run_model(const Config& cfg, const RunModelOptions& options = {});

// The model a checkpoint of the run holds: build_run_model (the frozen base from
// model.init_from, or from run.seed without it), then the checkpoint's tensors (`saved`: its
// trainable parameters and buffers, whole) copied in; `what` names them in errors.
std::shared_ptr<Model> restore_run_model(const Config& cfg, const io::NamedTensors& saved,
                                         const std::string& what);

// The model's weights as a plain model of its type has them, for --format hf: every
// parameter and buffer by name, each adapter merged into its layer's weight (W0 + scale B A;
// an NF4 weight dequantized) and left out itself.
io::NamedTensors merged_model_weights(torch::nn::Module& model);

}  // namespace frugal
