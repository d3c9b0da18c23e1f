// How the backward main kernel reads a query row's statistics, which the
// preprocess writes: -D (D = rowsum(dO * O) - dlse), the starting value of
// dP^T's accumulator, and -LSE, either the starting value of S^T's
// accumulator (in the units of q.k) or the exponent's offset (log2 units).
// Both travel with the row's Q tile, so starting an accumulator at them
// takes the loads out of the steps after the wgmma waits.
#pragma once

#include <cmath>

namespace dash_attn::sm90::bwd {

// P = exp2(x * scale - lse_log2): x = q.k, or tanh(q.k * softmax_scale /
// softcap) under a softcap.
inline float exponent_scale(float softmax_scale, float softcap) {
  return (softcap > 0.f ? softcap : softmax_scale) * static_cast<float>(M_LOG2E);
}

// Whether S^T's accumulator starts at -LSE (P = exp2(acc * scale), no LSE
// load after the S wait). Not under a softcap (the tanh comes between the
// GEMM and the offset). H200 A/B against the offset in the exponent
// (docs/perf_log.md, 2026-12-04, twenty-third session): hdim 128 +1-10%
// (full 8k 546 -> 603 TFLOPS), hdim 64 -1..-2.4% (filling 64 more registers
// before the step's first GEMM, exposed there, costs more than the loads),
// hdim 256 -2..+1.6%.
constexpr bool lse_in_accumulator(int head_dim, bool softcap) { return head_dim == 128 && !softcap; }

// The preprocess stores -lse_log2 / this: the exponent's scale where S^T's
// accumulator starts at it, 1 otherwise (+inf on padding rows becomes -inf
// either way, so their P is 0).
inline float lse_divisor(int head_dim, float softmax_scale, float softcap) {
  return lse_in_accumulator(head_dim, softcap > 0.f) ? exponent_scale(softmax_scale, softcap) : 1.f;
}

}  // namespace dash_attn::sm90::bwd
