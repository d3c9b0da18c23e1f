// The softcap of both passes (FlashAttention's semantics): a score s becomes
// softcap * tanh(s / softcap). The kernels fold the cap into the softmax
// scale: they compute t = tanh(q.k * softmax_scale / softcap) per element and
// exponentiate t * softcap * log2(e); the backward's dS gains 1 - t^2.
#pragma once

#include <cute/config.hpp>

#include "exp2_approx.hpp"

namespace dash_attn::sm90 {

// tanh(x) = 1 - 2 / (e^(2x) + 1), odd, with MUFU.EX2 and a fast reciprocal:
// absolute error ~1e-7 (tanh.approx.f32 has 2^-11 relative, which a cap of
// 50 turns into logit errors of ~0.02, more than bf16's own rounding of P).
// Large |x|: e^(2|x|) = inf and the quotient 0, so the result saturates at +-1.
CUTE_DEVICE float softcap_tanh(float x) {
  constexpr float kTwoLog2e = 2.0f * 1.4426950408889634f;
  const float e = exp2_approx(fabsf(x) * kTwoLog2e);
  return copysignf(1.0f - __fdividef(2.0f, e + 1.0f), x);
}

}  // namespace dash_attn::sm90
