#include "frugal/optim/quant8.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "frugal/util/error.h"

namespace frugal::quant8 {
namespace {

// The value of one code of the dynamic tree: `bits` magnitude bits (7 signed, 8 unsigned).
double tree_value(int magnitude, int bits) {
  if (magnitude == 0) return 0.0;
  int zeros = 0;  // leading zeros: the decimal exponent
  while ((magnitude & (1 << (bits - 1 - zeros))) == 0) ++zeros;
  const int fraction_bits = bits - 1 - zeros;  // after the indicator bit
  const int levels = 1 << fraction_bits;
  const int j = magnitude & (levels - 1);
  // Linear steps over (0.1, 1]: the top one is 1 exactly, so a block's absmax is exact.
  return std::pow(10.0, -zeros) * (0.1 + 0.9 * (j + 1) / levels);
}

at::Tensor build_map(bool is_signed) {
  std::vector<float> values;
  values.reserve(256);
  if (is_signed) {
    for (int m = 0; m < 128; ++m) {
      const double v = tree_value(m, 7);
      values.push_back(static_cast<float>(v));
      values.push_back(static_cast<float>(-v));
    }
  } else {
    for (int m = 0; m < 256; ++m) values.push_back(static_cast<float>(tree_value(m, 8)));
  }
  std::sort(values.begin(), values.end());
  return at::tensor(values, at::kFloat);
}

// The 255 midpoints between neighbouring codes: searchsorted against them gives the nearest
// code in one pass (a value on a midpoint takes the lower code). never_flush: the first
// midpoint moves down to 0, so that every positive value takes code 1 at least.
at::Tensor build_midpoints(bool is_signed, bool never_flush) {
  const at::Tensor& map = dynamic_map(is_signed);
  at::Tensor mid = (map.narrow(0, 0, 255) + map.narrow(0, 1, 255)) / 2;
  if (never_flush) mid[0] = 0.0f;
  return mid;
}

// Table 0: the signed map, 1: unsigned, 2: unsigned midpoints, 3: signed midpoints,
// 4: unsigned never_flush midpoints; on a device, copied there once.
const at::Tensor& table_on(int which, const at::Device& device) {
  static const at::Tensor cpu[5] = {dynamic_map(true), dynamic_map(false),
                                    build_midpoints(false, false), build_midpoints(true, false),
                                    build_midpoints(false, true)};
  if (device.is_cpu()) return cpu[which];
  static std::mutex mutex;
  static std::map<std::pair<int, std::string>, at::Tensor> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& t = cache[{which, device.str()}];
  if (!t.defined()) t = cpu[which].to(device);
  return t;
}

const at::Tensor& map_on(bool is_signed, const at::Device& device) {
  return table_on(is_signed ? 0 : 1, device);
}

const at::Tensor& midpoints_on(bool is_signed, bool never_flush, const at::Device& device) {
  return table_on(is_signed ? 3 : (never_flush ? 4 : 2), device);
}

void check_block(int64_t block) {
  if (block < 1) throw Error("quant8: block size must be >= 1, got " + std::to_string(block));
}

}  // namespace

const at::Tensor& dynamic_map(bool is_signed) {
  static const at::Tensor signed_map = build_map(true);
  static const at::Tensor unsigned_map = build_map(false);
  return is_signed ? signed_map : unsigned_map;
}

void quantize_into(const at::Tensor& values, bool is_signed, int64_t block, bool never_flush,
                   at::Tensor& codes, at::Tensor& absmax) {
  check_block(block);
  const int64_t n = values.numel();
  const int64_t blocks = block_count(n, block);
  at::Tensor flat = values.reshape({-1}).to(at::kFloat);
  // [blocks, block], the tail padded with zeros (which change no absmax).
  at::Tensor padded = flat;
  if (blocks * block != n) {
    padded = at::zeros({blocks * block}, flat.options());
    padded.narrow(0, 0, n).copy_(flat);
  }
  at::Tensor rows = padded.view({blocks, block});
  at::Tensor max = rows.abs().amax(1);
  // x / absmax: exactly +-1 at the maximum; an all-zero block divides by the smallest normal
  // float and stays 0.
  at::Tensor normalized =
      rows / max.clamp_min(std::numeric_limits<float>::min()).unsqueeze(1);
  if (never_flush && is_signed) throw Error("quant8: never_flush is for the unsigned map");
  // The nearest code: the number of midpoints below the value.
  at::Tensor index = at::searchsorted(midpoints_on(is_signed, never_flush, values.device()),
                                      normalized, /*out_int32=*/true);
  codes.copy_(index.view({-1}).narrow(0, 0, n));
  absmax.copy_(max);
}

Quantized zeros(int64_t numel, bool is_signed, int64_t block, const at::TensorOptions& options) {
  check_block(block);
  // The first 0 in the sorted map: the signed map holds its negatives below it.
  const int64_t zero = is_signed ? 127 : 0;
  Quantized q;
  q.codes = at::full({numel}, zero, options.dtype(at::kByte).requires_grad(false));
  q.absmax = at::zeros({block_count(numel, block)}, options.dtype(at::kFloat).requires_grad(false));
  return q;
}

Quantized quantize(const at::Tensor& values, bool is_signed, int64_t block, bool never_flush) {
  check_block(block);
  Quantized q;
  q.codes = at::empty({values.numel()}, values.options().dtype(at::kByte));
  q.absmax = at::empty({block_count(values.numel(), block)}, values.options().dtype(at::kFloat));
  quantize_into(values, is_signed, block, never_flush, q.codes, q.absmax);
  return q;
}

at::Tensor dequantize(const at::Tensor& codes, const at::Tensor& absmax, bool is_signed,
                      int64_t block) {
  check_block(block);
  const int64_t n = codes.numel();
  if (absmax.numel() != block_count(n, block)) {
    throw Error("quant8: " + std::to_string(absmax.numel()) + " block maxima for " +
                std::to_string(n) + " codes in blocks of " + std::to_string(block) +
                " (expected " + std::to_string(block_count(n, block)) + ")");
  }
  at::Tensor values = map_on(is_signed, codes.device()).take(codes.reshape({-1}).to(at::kLong));
  return values.mul_(absmax.repeat_interleave(block).narrow(0, 0, n));
}

}  // namespace frugal::quant8
