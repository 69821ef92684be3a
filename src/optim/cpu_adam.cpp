#include "frugal/optim/cpu_adam.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <cmath>

#include "cpu_adam_isa.h"
#include "cpu_isa.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

using cpu_adam_isa::Consts;

// The kernels of the widest instruction set this CPU has.
const cpu_adam_isa::Kernels& kernels() {
  static const cpu_adam_isa::Kernels k = []() -> cpu_adam_isa::Kernels {
    switch (best_cpu_isa()) {
      case CpuIsa::Avx512:
        return {&cpu_adam_isa::update_AVX512, &cpu_adam_isa::update_bf16_AVX512,
                &cpu_adam_isa::update_bf16_fp32grad_AVX512};
      case CpuIsa::Avx2:
        return {&cpu_adam_isa::update_AVX2, &cpu_adam_isa::update_bf16_AVX2,
                &cpu_adam_isa::update_bf16_fp32grad_AVX2};
      case CpuIsa::Default:
        break;
    }
    return {&cpu_adam_isa::update_DEFAULT, &cpu_adam_isa::update_bf16_DEFAULT,
            &cpu_adam_isa::update_bf16_fp32grad_DEFAULT};
  }();
  return k;
}

void update(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c) {
  kernels().fp32(p, g, m, v, n, c);
}
void update(c10::BFloat16* p, const c10::BFloat16* g, float* m, float* v, int64_t n, const Consts& c) {
  kernels().bf16(p, g, m, v, n, c);
}
void update(c10::BFloat16* p, const float* g, float* m, float* v, int64_t n, const Consts& c) {
  kernels().bf16_fp32grad(p, g, m, v, n, c);
}

template <typename P, typename G>
void run(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v, const Consts& c) {
  P* p = param.data_ptr<P>();
  const G* g = grad.const_data_ptr<G>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  // Chunks of at least 32K elements: enough work per thread to hide the fork.
  at::parallel_for(0, param.numel(), 32768, [&](int64_t begin, int64_t end) {
    update(p + begin, g + begin, mp + begin, vp + begin, end - begin, c);
  });
}

}  // namespace

void cpu_adam_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg,
                   at::Tensor& exp_avg_sq, const AdamHyper& h, int64_t step) {
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!t->device().is_cpu() || !t->is_contiguous() || t->numel() != param.numel()) {
      throw Error("cpu_adam_step: parameter, gradient and moments must be contiguous CPU "
                  "tensors of the same size");
    }
  }
  if (exp_avg.scalar_type() != at::kFloat || exp_avg_sq.scalar_type() != at::kFloat) {
    throw Error("cpu_adam_step: the moments must be float32");
  }
  if (step < 1) throw Error("cpu_adam_step: step counts from 1");
  Consts c;
  c.beta1 = static_cast<float>(h.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  c.eps = static_cast<float>(h.eps);
  c.weight_decay = static_cast<float>(h.weight_decay);
  c.decay_factor = static_cast<float>(1.0 - h.lr * h.weight_decay);
  c.decoupled = h.decoupled;
  c.grad_factor = static_cast<float>(h.grad_factor);
  // As torch.optim: bias corrections in double, then used in float.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  c.step_size = static_cast<float>(h.lr / bc1);
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2));
  const auto pt = param.scalar_type(), gt = grad.scalar_type();
  if (pt == at::kFloat && gt == at::kFloat) {
    run<float, float>(param, grad, exp_avg, exp_avg_sq, c);
  } else if (pt == at::kBFloat16 && gt == at::kBFloat16) {
    run<c10::BFloat16, c10::BFloat16>(param, grad, exp_avg, exp_avg_sq, c);
  } else if (pt == at::kBFloat16 && gt == at::kFloat) {
    run<c10::BFloat16, float>(param, grad, exp_avg, exp_avg_sq, c);
  } else {
    throw Error("cpu_adam_step: parameters and gradients must be float32 or bfloat16");
  }
}

}  // namespace frugal
