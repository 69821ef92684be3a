#include "frugal/quant/nf4.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal::nf4 {
namespace {

// torchao's levels (QLoRA's, to 4 decimals), as Python floats: converted to the weight's dtype
// the way torch.tensor(list, dtype=...) converts them (double, then the dtype).
constexpr double kLevels[16] = {-1.0,   -0.6962, -0.5251, -0.3949, -0.2844, -0.1848,
                                -0.0911, 0.0,     0.0796,  0.1609,  0.2461,  0.3379,
                                0.4407,  0.5626,  0.7230,  1.0};

// Values quantized per pass in quantize(): the (chunk, 16) distance matrix is the big temporary,
// 4 MiB in fp32 (with the chunk's other temporaries about 5 MiB): small beside any model worth
// quantizing, which the loading bound (hf::load_weights_quantized) needs, and large enough that
// the per-chunk operator overhead stays small. A multiple of kBlock.
constexpr int64_t kQuantizeChunk = int64_t{1} << 16;

// The levels in `dtype` (table 0: 16 values) and the 256 x 2 table of each byte's two levels
// (table 1: high nibble, low nibble), built once per dtype and device: on a GPU, no host-to-device
// copy (a synchronisation) per call.
const at::Tensor& nf4_table(int which, at::ScalarType dtype, const c10::Device& device) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, std::string>, at::Tensor> cache;
  std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& t = cache[{which, static_cast<int>(dtype), device.str()}];
  if (!t.defined() && device.is_meta()) {
    // A model built on the meta device (the planner's, a folder load's first step): shapes
    // only, and no real tensor can be made while its factories land on meta.
    t = at::empty(which == 0 ? std::vector<int64_t>{16} : std::vector<int64_t>{256, 2},
                  at::TensorOptions().dtype(dtype).device(device));
  } else if (!t.defined()) {
    // torch.tensor(list of Python floats, dtype=...): each double converted to the dtype.
    const at::Tensor levels =
        at::tensor(at::ArrayRef<double>(kLevels, 16), at::TensorOptions().dtype(at::kDouble))
            .to(dtype);
    if (which == 0) {
      t = levels.to(device);
    } else {
      const at::Tensor byte = at::arange(256, at::kInt);
      t = at::stack({levels.index_select(0, byte.bitwise_right_shift(4)),
                     levels.index_select(0, byte.bitwise_and(15))},
                    1)
              .to(device);
    }
  }
  return t;
}

std::string nf4_shape_text(at::IntArrayRef shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t nf4_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The scalers (one per block of 64) back in the weight's dtype: int8 / factor, plus the mean,
// with torchao's operations in its order (dequantize_scalers).
at::Tensor nf4_block_scales(const Nf4Weight& w) {
  const int64_t n_scaler_blocks = w.scaler_factors.numel();
  const at::Tensor q = w.scaler_codes.view({n_scaler_blocks, kScalerBlock});
  return (q / w.scaler_factors.unsqueeze(-1)).flatten().to(w.dtype) + w.scaler_mean;
}

void nf4_check_consistent(const Nf4Weight& w) {
  const int64_t numel = nf4_numel(w.shape);
  const bool ok = w.codes.defined() && w.scaler_codes.defined() && w.scaler_factors.defined() &&
                  w.scaler_mean.defined() && numel > 0 && numel % (kBlock * kScalerBlock) == 0 &&
                  w.codes.scalar_type() == at::kByte && w.codes.numel() * 2 == numel &&
                  w.scaler_codes.scalar_type() == at::kChar &&
                  w.scaler_codes.numel() * kBlock == numel &&
                  w.scaler_factors.numel() * kBlock * kScalerBlock == numel &&
                  w.scaler_mean.numel() == 1;
  if (!ok) {
    throw Error(fmt::format("nf4: a weight of shape {} does not match its codes ({} bytes, {} "
                            "scaler codes, {} factors)",
                            nf4_shape_text(w.shape), w.codes.defined() ? w.codes.numel() : 0,
                            w.scaler_codes.defined() ? w.scaler_codes.numel() : 0,
                            w.scaler_factors.defined() ? w.scaler_factors.numel() : 0));
  }
}

// The compute dtype of linear(): what at::linear's autocast would cast x to, else x's dtype.
at::ScalarType nf4_compute_dtype(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  const std::optional<at::ScalarType> dtype = autocast_dtype(device);
  // Meta tensors (the planner's trace) as the CPU's would be.
  if (dtype && (x.is_meta() || at::autocast::is_eligible(x, device))) return *dtype;
  return x.scalar_type();
}

Nf4Weight nf4_weight_from(const at::Tensor& codes, const at::Tensor& scaler_codes,
                          const at::Tensor& factors, const at::Tensor& mean,
                          const c10::IValue& shape, const c10::IValue& dtype) {
  Nf4Weight w;
  w.codes = codes;
  w.scaler_codes = scaler_codes;
  w.scaler_factors = factors;
  w.scaler_mean = mean;
  w.shape = shape.toIntVector();
  w.dtype = static_cast<at::ScalarType>(dtype.toInt());
  return w;
}

// linear() as an autograd function. Saved for backward: the four NF4 tensors only.
struct Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const std::optional<at::Tensor>& bias, const Nf4Weight& w) {
    const at::ScalarType compute = nf4_compute_dtype(x);
    const bool under_autocast = autocast_dtype(x.device().type()).has_value();
    std::optional<at::Tensor> b;
    if (bias.has_value() && bias->defined()) {
      b = under_autocast &&
                  (bias->is_meta() || at::autocast::is_eligible(*bias, bias->device().type()))
              ? bias->to(compute)
              : *bias;
    }
    // The casts are done: ATen's own autocast must not redo them.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    at::Tensor out = at::linear(x.to(compute), dequantize(w, compute), b);
    ctx->save_for_backward({w.codes, w.scaler_codes, w.scaler_factors, w.scaler_mean});
    ctx->saved_data["shape"] = w.shape;
    ctx->saved_data["dtype"] = static_cast<int64_t>(w.dtype);
    ctx->saved_data["compute"] = static_cast<int64_t>(compute);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["x_grad"] = x.requires_grad();
    const bool bias_grad = bias.has_value() && bias->defined() && bias->requires_grad();
    ctx->saved_data["bias_grad"] = bias_grad;
    if (bias_grad) {
      ctx->saved_data["bias_shape"] = bias->sizes().vec();
      ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias->scalar_type());
    }
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Nf4Weight w = nf4_weight_from(saved[0], saved[1], saved[2], saved[3],
                                        ctx->saved_data["shape"], ctx->saved_data["dtype"]);
    const auto compute = static_cast<at::ScalarType>(ctx->saved_data["compute"].toInt());
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const at::Tensor grad = grads[0].to(compute);
    at::Tensor grad_x, grad_bias;
    if (ctx->saved_data["x_grad"].toBool()) {
      const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
      grad_x = at::matmul(grad, dequantize(w, compute)).to(x_dtype);
    }
    if (ctx->saved_data["bias_grad"].toBool()) {
      const auto shape = ctx->saved_data["bias_shape"].toIntVector();
      const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
      grad_bias = at::sum_to(grad, shape, /*always_return_non_view=*/true).to(dtype);
    }
    return {grad_x, grad_bias, at::Tensor()};
  }
};

}  // namespace

int64_t Nf4Weight::bytes() const {
  int64_t total = 0;
  for (const at::Tensor* t : {&codes, &scaler_codes, &scaler_factors, &scaler_mean}) {
    if (t->defined()) total += static_cast<int64_t>(t->nbytes());
  }
  return total;
}

Nf4Weight quantize(const at::Tensor& w, const std::string& name,
                   std::optional<at::ScalarType> as) {
  const int64_t multiple = kBlock * kScalerBlock;
  if (!w.defined() || !at::isFloatingType(w.scalar_type())) {
    throw Error(fmt::format("nf4: cannot quantize '{}': expected a floating-point tensor, got {}",
                            name, w.defined() ? c10::toString(w.scalar_type()) : "none"));
  }
  if (w.numel() == 0 || w.numel() % multiple != 0) {
    throw Error(fmt::format(
        "nf4: cannot quantize '{}' of shape {} ({} elements): NF4 needs a positive multiple of "
        "{} elements (blocks of {}, their scales quantized in groups of {} blocks)",
        name, nf4_shape_text(w.sizes()), w.numel(), multiple, kBlock, kScalerBlock));
  }
  at::NoGradGuard no_grad;
  const at::ScalarType dtype = as.value_or(w.scalar_type());
  const int64_t numel = w.numel();
  const int64_t n_blocks = numel / kBlock;
  const int64_t n_scaler_blocks = n_blocks / kScalerBlock;
  if (w.is_meta()) {
    // The planner's model on the meta device: the tensors' shapes and dtypes, nothing computed
    // (several of the ops below have no meta kernel in C++).
    Nf4Weight out;
    out.codes = at::empty({numel / 2}, w.options().dtype(at::kByte));
    out.scaler_codes = at::empty({n_blocks}, w.options().dtype(at::kChar));
    out.scaler_factors = at::empty({n_scaler_blocks}, w.options().dtype(dtype));
    out.scaler_mean = at::empty({}, w.options().dtype(dtype));
    out.shape = w.sizes().vec();
    out.dtype = dtype;
    return out;
  }
  const at::Tensor flat = w.detach().reshape({-1});  // row-major, as torchao's flatten()
  // Chunk by chunk, each converted to the dtype as it is read: every step is per value or per
  // block, so the result is the whole tensor's, and the temporaries stay a chunk's whatever the
  // weight's size (a bf16 file tensor quantized in fp32 never exists in fp32 whole).
  auto chunk = [&](int64_t start, int64_t len) {
    return flat.narrow(0, start, len).to(dtype).view({len / kBlock, kBlock});
  };

  // Double quantization of the block absmaxes (torchao's double_quantize_scalers).
  at::Tensor absmax = at::empty({n_blocks}, w.options().dtype(dtype));
  for (int64_t start = 0; start < numel; start += kQuantizeChunk) {
    const int64_t len = std::min(kQuantizeChunk, numel - start);
    absmax.narrow(0, start / kBlock, len / kBlock).copy_(std::get<0>(chunk(start, len).abs().max(1)));
  }
  Nf4Weight out;
  out.scaler_mean = absmax.mean();
  const at::Tensor centred = (absmax - out.scaler_mean).view({n_scaler_blocks, kScalerBlock});
  const at::Tensor centred_absmax = std::get<0>(centred.abs().max(1));
  // torchao writes 256 / (2 * absmax); Python's scalar / tensor is reciprocal() * scalar.
  out.scaler_factors = (centred_absmax * 2).reciprocal() * 256;
  out.scaler_codes = (centred * out.scaler_factors.unsqueeze(-1))
                         .round()
                         .clamp(-128, 127)
                         .flatten()
                         .to(at::kChar);

  // The values: index of the nearest level to value / absmax; ties take the lower index
  // (min's first minimum), and 0/0 (an all-zero block) is NaN, whose nearest is index 0.
  const at::Tensor& table = nf4_table(0, dtype, w.device());
  out.codes = at::empty({numel / 2}, w.options().dtype(at::kByte));
  for (int64_t start = 0; start < numel; start += kQuantizeChunk) {
    const int64_t len = std::min(kQuantizeChunk, numel - start);
    const at::Tensor scaled =
        chunk(start, len) / absmax.narrow(0, start / kBlock, len / kBlock).unsqueeze(-1);
    const at::Tensor nearest = std::get<1>((scaled.reshape({len, 1}) - table).abs_().min(-1));
    const at::Tensor pairs = nearest.to(at::kByte).view({len / 2, 2});
    // [a, b] -> (a << 4) | b: the even element in the high nibble.
    out.codes.narrow(0, start / 2, len / 2)
        .copy_(pairs.select(1, 0).bitwise_left_shift(4).bitwise_or_(pairs.select(1, 1)));
  }
  out.shape = w.sizes().vec();
  out.dtype = dtype;
  return out;
}

at::Tensor dequantize(const Nf4Weight& w, at::ScalarType dtype) {
  nf4_check_consistent(w);
  at::NoGradGuard no_grad;
  const int64_t numel = nf4_numel(w.shape);
  const int64_t n_blocks = numel / kBlock;
  // Each byte's two levels at once: a 256 x 2 table indexed by the byte (int32 indices, 2
  // bytes a weight, where unpacking into int64 nibbles would take 16).
  const at::Tensor& pair_table = nf4_table(1, w.dtype, w.codes.device());
  at::Tensor values = pair_table.index_select(0, w.codes.to(at::kInt)).view({n_blocks, kBlock});
  // level * scale in w.dtype, as torchao multiplies them.
  values.mul_(nf4_block_scales(w).unsqueeze(-1));
  values = values.view(w.shape);
  return dtype == w.dtype ? values : values.to(dtype);
}

at::Tensor linear(const at::Tensor& x, const Nf4Weight& w, const std::optional<at::Tensor>& bias) {
  if (w.shape.size() != 2) {
    throw Error(fmt::format("nf4::linear: the weight must be 2-D (out, in), got shape {}",
                            nf4_shape_text(w.shape)));
  }
  if (!x.defined() || x.dim() < 1 || x.size(-1) != w.shape[1]) {
    throw Error(fmt::format("nf4::linear: input of shape {} does not match a weight of shape {} "
                            "(expected {} features last)",
                            x.defined() ? nf4_shape_text(x.sizes()) : "none",
                            nf4_shape_text(w.shape), w.shape[1]));
  }
  return Nf4LinearFunction::apply(x, bias, w);
}

}  // namespace frugal::nf4
