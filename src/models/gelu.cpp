#include "frugal/models/gelu.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/autograd/custom_function.h>

#include "../optim/cpu_isa.h"
#include "gelu_isa.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

struct GeluKernels {
  void (*fp32)(const float*, float*, float*, int64_t);
  void (*bf16)(const c10::BFloat16*, c10::BFloat16*, c10::BFloat16*, int64_t);
};

const GeluKernels& kernels() {
  using namespace gelu_isa;
  static const GeluKernels k = []() -> GeluKernels {
    switch (best_cpu_isa()) {
      case CpuIsa::Avx512: return {&forward_AVX512, &forward_bf16_AVX512};
      case CpuIsa::Avx2: return {&forward_AVX2, &forward_bf16_AVX2};
      case CpuIsa::Default: break;
    }
    return {&forward_DEFAULT, &forward_bf16_DEFAULT};
  }();
  return k;
}

template <typename T, typename Fn>
void run(const at::Tensor& x, at::Tensor& y, at::Tensor& dy, Fn fn) {
  const T* px = x.const_data_ptr<T>();
  T* py = y.data_ptr<T>();
  T* pdy = dy.data_ptr<T>();
  at::parallel_for(0, x.numel(), 16384, [&](int64_t begin, int64_t end) {
    fn(px + begin, py + begin, pdy + begin, end - begin);
  });
}

class FrugalGelu : public torch::autograd::Function<FrugalGelu> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input) {
    at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x);
    at::Tensor dy = at::empty_like(x);
    if (x.scalar_type() == at::kBFloat16) {
      run<c10::BFloat16>(x, y, dy, kernels().bf16);
    } else {
      run<float>(x, y, dy, kernels().fp32);
    }
    ctx->save_for_backward({dy});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    refuse_double_backward("GELU");
    return {at::mul(grads[0], ctx->get_saved_variables()[0])};
  }
};

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x, Kernels kernels) {
  const bool frugal = kernels != Kernels::Aten && frugal_kernels_take(x);
  if (kernels == Kernels::Frugal && !frugal) {
    throw Error("model.kernels: frugal's GELU runs on CPU with float32 or bfloat16 "
                "activations; use auto or aten");
  }
  if (!frugal) return at::gelu(x, "tanh");
  return FrugalGelu::apply(x);
}

}  // namespace frugal
