// One parameter's optimizer state as tensors by kind, and back: Adam / AdamW keep exp_avg,
// exp_avg_sq, max_exp_avg_sq (amsgrad) and step; SGD keeps momentum_buffer; AdamW8bit keeps
// step and exp_avg_code / exp_avg_absmax / exp_avg_sq_code / exp_avg_sq_absmax (uint8 codes
// and fp32 block maxima, as the optimizer holds them); Adafactor keeps step and
// exp_avg_sq_row / exp_avg_sq_col (matrices) or exp_avg_sq (vectors). Sharded checkpoints
// store state this way, so that element-wise kinds can be resharded element by element.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>

namespace frugal {

// Empty when the parameter has no state yet (before the first step). `step` is a 0-dim int64.
std::map<std::string, at::Tensor> param_state_tensors(torch::optim::Optimizer& optimizer,
                                                      const at::Tensor& param);
// Replaces the parameter's state; tensors are copied to the parameter's device and dtype
// (step stays an integer). An optimizer other than Adam, AdamW and SGD is a frugal::Error.
void set_param_state(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                     const std::map<std::string, at::Tensor>& kinds);

// The step count the parameter's state keeps (Adam, AdamW, AdamW8bit, Adafactor), or -1 when it
// keeps none (SGD) or has no state yet; and setting it (a no-op where it keeps none). NVMe
// offload steps a large parameter piece by piece, one optimizer call per piece, and puts the
// count back before each piece so that the whole parameter advances by one step.
int64_t param_state_step(torch::optim::Optimizer& optimizer, const at::Tensor& param);
void set_param_state_step(torch::optim::Optimizer& optimizer, const at::Tensor& param, int64_t step);

// Whether the optimizer's state is element-wise, tensors of the parameter's shape alone (Adam,
// AdamW, SGD and their fused versions): stepping a slice of a parameter with the same slices of
// its state is then the full step's update of those elements.
bool elementwise_state(const torch::optim::Optimizer& optimizer);

// Whether a kind holds one value per parameter element (or is the step), so that a
// checkpoint's tensors of it can be cut for another sharding layout. Quantized codes with
// their block maxima and factored rows / columns cannot: their blocks and rows belong to the
// tensor that was quantized or factored.
bool reshardable_state_kind(const std::string& kind);

}  // namespace frugal
