// Blockwise dynamic 8-bit quantization of optimizer state (Dettmers et al. 2022, "8-bit
// Optimizers via Block-wise Quantization"). A tensor is read flat and cut into blocks of
// `block` values (the last one may be shorter); each block keeps its absolute maximum as one
// fp32, and each value the uint8 index of the code nearest to value / absmax in a 256-entry
// map. The map is the dynamic tree (Dettmers 2016): a code's bits are [sign] then E zero bits
// (the decimal exponent, 10^-E), a one bit, and the remaining bits a linear fraction in
// (0.1, 1]; all-zero magnitude is 0. The signed map (first moments) spends one bit on the
// sign; the unsigned map (second moments, never negative) gives it to the fraction. The
// exponent bits buy a range of 6 decades (signed) or 7 (unsigned) below each block's absmax,
// with the finest steps (0.9/64 and 0.9/128 of the absmax) near the absmax, where the
// largest updates are decided.
// Everything is ATen ops on whatever device the tensors are on (CPU or CUDA).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>

namespace frugal::quant8 {

// The 256 code values in increasing order (fp32, on the CPU); a stored code is an index into
// it. Signed: 0, +-1 and 127 magnitudes each side, with 0 twice (the sign bit over a zero
// magnitude); unsigned: 0, 1 and 254 values between.
const at::Tensor& dynamic_map(bool is_signed);

// Blocks of `block` values covering `numel` values.
inline int64_t block_count(int64_t numel, int64_t block) { return (numel + block - 1) / block; }

struct Quantized {
  at::Tensor codes;   // uint8, one per value (flat, numel)
  at::Tensor absmax;  // fp32, one per block
};

// numel zeros: every code the map's 0, every absmax 0; on `options`' device.
Quantized zeros(int64_t numel, bool is_signed, int64_t block, const at::TensorOptions& options);

// Nearest code per value. `never_flush` (the second moment): a positive value below the
// smallest non-zero code takes that code instead of 0, so that sqrt(v) in Adam's denominator
// cannot collapse to eps under a first moment that kept its magnitude (the update of such a
// value stays below lr instead of growing to lr * m / eps).
Quantized quantize(const at::Tensor& values, bool is_signed, int64_t block, bool never_flush = false);
// Into existing storage (codes: uint8 of values.numel(), absmax: fp32 of the block count).
void quantize_into(const at::Tensor& values, bool is_signed, int64_t block, bool never_flush,
                   at::Tensor& codes, at::Tensor& absmax);
// fp32, flat (numel = codes.numel()), on the codes' device.
at::Tensor dequantize(const at::Tensor& codes, const at::Tensor& absmax, bool is_signed,
                      int64_t block);

}  // namespace frugal::quant8
