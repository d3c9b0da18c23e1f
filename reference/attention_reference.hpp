// fp64 CPU attention: the ground truth for every test and the benchmark's
// --verify. Dense row-major tensors: q, out, dout, dq are (batch, seqlen_q,
// heads_q, head_dim); k, v, dk, dv are (batch, seqlen_k, heads_kv, head_dim);
// lse is (batch, heads_q, seqlen_q), natural log.
#pragma once

#include <cstdint>
#include <vector>

#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::reference {

// Bottom-right aligned causal mask (FlashAttention 2/3): query row i sees key
// j iff j <= i + seqlen_k - seqlen_q. With seqlen_q > seqlen_k the first
// seqlen_q - seqlen_k rows see nothing: their O is 0 and their LSE is -inf.
// The rule is the kernels' (mask::MaskGeometry's row range), not a copy of it;
// row < seqlen_q and key < seqlen_k (< 2^31, as the kernels require).
inline bool key_visible(int64_t row, int64_t key, int64_t seqlen_q, int64_t seqlen_k, bool causal) {
  const mask::MaskGeometry rows = mask::mask_geometry(static_cast<int>(seqlen_q), static_cast<int>(seqlen_k), 1, 1,
                                                      mask::causal_window(causal));
  return rows.visible(static_cast<int>(row), static_cast<int>(key));
}

struct ForwardResult {
  std::vector<double> out;
  std::vector<double> lse;
};

struct Gradients {
  std::vector<double> dq, dk, dv;
};

ForwardResult attention_forward(const ProblemShape& shape, bool causal, double softmax_scale,
                                const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& v);

// Gradients of sum(out * dout) with respect to q, k, v. For GQA/MQA dk and dv
// sum over the q-heads of each group.
Gradients attention_backward(const ProblemShape& shape, bool causal, double softmax_scale,
                             const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const std::vector<double>& dout);

// Element counts of the dense tensors above.
inline int64_t q_elements(const ProblemShape& s) { return s.batch * s.seqlen_q * s.heads_q * s.head_dim; }
inline int64_t kv_elements(const ProblemShape& s) { return s.batch * s.seqlen_k * s.heads_kv * s.head_dim; }
inline int64_t lse_elements(const ProblemShape& s) { return s.batch * s.heads_q * s.seqlen_q; }

}  // namespace dash_attn::reference
