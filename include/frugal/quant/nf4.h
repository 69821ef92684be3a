// 4-bit NormalFloat (NF4) weights, as QLoRA (Dettmers et al. 2023) stores its frozen base
// model, bit for bit what torchao's `to_nf4` (NF4Tensor, torchao 0.18) stores and returns.
//
// A weight is read flat (row-major) and cut into blocks of kBlock = 64 values. Each value keeps
// the 4-bit index of the nearest of 16 NormalFloat levels (-1 ... 1) to value / absmax(block),
// two indices per byte: the even element in the high nibble, the odd one in the low nibble.
// The blocks' absmaxes are double-quantized: their mean is subtracted, and the centred absmaxes
// are quantized to int8 with one scale per kScalerBlock = 256 blocks (round half to even,
// clamped to [-128, 127]). Scales, mean and levels are in the weight's own dtype, and so is
// every step of the arithmetic, exactly as torchao does it (tests/unit/test_nf4.cpp checks
// quantize and dequantize against torchao, tests/python/nf4_reference.py).
//
// The flat length must be a multiple of 64 * 256 = 16384 (the block count a multiple of 256),
// which torchao requires too. Everything is ATen ops on the weight's device (CPU or CUDA).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace frugal::nf4 {

constexpr int64_t kBlock = 64, kScalerBlock = 256;

struct Nf4Weight {
  at::Tensor codes;           // uint8, numel / 2: two 4-bit codes per byte (torchao's quantized_data)
  at::Tensor scaler_codes;    // int8, one per block of 64 (torchao's quantized_scalers)
  at::Tensor scaler_factors;  // dtype, one per 256 blocks (torchao's quantization_factor)
  at::Tensor scaler_mean;     // dtype, 0-dim (torchao's scaler_mean)
  std::vector<int64_t> shape;  // the original weight's
  at::ScalarType dtype = at::kFloat;
  // Storage bytes of the four tensors above: numel / 2 + numel / 64 + (numel / 16384 + 1) *
  // itemsize(dtype), about 0.5159 bytes (4.13 bits) per parameter in fp32.
  int64_t bytes() const;
};

// Quantizes a floating-point weight of any shape whose element count is a positive multiple of
// 16384; else a frugal::Error naming `name`, the shape and what is expected. No autograd
// history is recorded. The codes are on the weight's device. `as`: the dtype it is quantized in
// (the scales' and the arithmetic's; by default the weight's own), the same bits as
// quantize(w.to(as)) without converting the whole weight at once: the temporaries are a few MiB
// whatever the weight's size.
Nf4Weight quantize(const at::Tensor& w, const std::string& name,
                   std::optional<at::ScalarType> as = std::nullopt);

// The weight as torchao's get_original_weight().to(dtype) returns it: computed in w.dtype, then
// cast to `dtype`. Shape w.shape, on the codes' device.
at::Tensor dequantize(const Nf4Weight& w, at::ScalarType dtype);

// y = x W^T + bias for a 2-D NF4 weight W of shape (out, in); x is (..., in). W is dequantized
// inside forward and again inside backward, so the only tensors kept for backward are the NF4
// tensors (about half a byte per weight), never the full-precision weight, nor x. Gradients flow
// to x and to bias (where they require grad); the NF4 weight is frozen and gets none.
//
// The compute dtype: under autocast for x's device (and x a floating type other than double)
// the autocast dtype, else x's dtype. W is dequantized in its own dtype then cast to the compute
// dtype; x and bias are cast to it under autocast (what at::linear's autocast does), so the
// result equals at::linear(x, dequantize(w, dtype), bias) with or without autocast. torchao's
// linear_nf4 (weight.to(input.dtype) inside F.linear) gives the same bits: its fp32 detour before
// the autocast cast is exact. Backward computes grad_x = grad_y W in the compute dtype (as the
// autocast linear's backward does), then returns it in x's dtype; grad_bias is grad_y summed to
// the bias shape, in the bias dtype. No second derivative.
at::Tensor linear(const at::Tensor& x, const Nf4Weight& w, const std::optional<at::Tensor>& bias);

}  // namespace frugal::nf4
