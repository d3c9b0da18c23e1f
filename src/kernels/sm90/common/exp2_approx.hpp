// The one exponential of both passes.
#pragma once

#include <cute/config.hpp>

namespace dash_attn::sm90 {

// MUFU.EX2 directly: exp2f without fast-math wraps it in denormal handling
// (a compare and two multiplies per element), which the softmax of the
// forward and the P recomputation of the backward cannot afford. Results
// below 2^-126 flush to zero, far below what a 16-bit P can hold.
CUTE_DEVICE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace dash_attn::sm90
