// fp64 CPU attention: the ground truth for every test and the benchmark's
// --verify. Dense row-major tensors: q, out, dout, dq are (batch, seqlen_q,
// heads_q, head_dim); k, v, dk, dv are (batch, seqlen_k, heads_kv, head_dim);
// lse is (batch, heads_q, seqlen_q), natural log; sinks and dsinks (heads_q).
#pragma once

#include <cstdint>
#include <vector>

#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::reference {

// What the score and the softmax do beyond q.k (issue 18), with
// FlashAttention's / transformers' semantics. The defaults are no mask, no
// softcap, no sinks; causal_options(causal) is what the bool overloads use.
struct AttentionOptions {
  // FlashAttention's window_size = (left, right), bottom-right aligned: with
  // offset = seqlen_k - seqlen_q, row r sees key c iff
  // r + offset - left <= c <= r + offset + right; negative = unbounded on that
  // side. (-1, -1) is no mask, (-1, 0) causal. The rule is mask::MaskGeometry's
  // (built with mask::sliding_window), not a copy of it.
  int window_left = -1;
  int window_right = -1;
  // > 0: the score s = softmax_scale * q.k becomes softcap * tanh(s / softcap)
  // before masking and softmax (the scale applied first, as FA2/FA3). 0: off.
  double softcap = 0.0;
  // nullptr, or heads_q logits: sinks[h] joins the softmax denominator of
  // every row of q head h (all batches) and carries no value, so
  // lse = log(exp(sink) + sum_j exp(s_j)) and out = sum_j exp(s_j - lse) v_j.
  // Not scaled or capped. A row that sees no key gets out = 0, lse = sink.
  const float* sinks = nullptr;
};

inline AttentionOptions causal_options(bool causal) { return AttentionOptions{-1, causal ? 0 : -1}; }

// The mask of one (batch, head) sequence pair under `options`; its row
// queries (col_begin, col_end, visible) are the reference's mask.
inline mask::MaskGeometry row_mask(int64_t seqlen_q, int64_t seqlen_k, const AttentionOptions& options) {
  const int sq = static_cast<int>(seqlen_q), sk = static_cast<int>(seqlen_k);
  return mask::mask_geometry(sq, sk, 1, 1, mask::sliding_window(options.window_left, options.window_right, sq, sk));
}

// Whether query row `row` sees key `key` under the options' window. A right
// bound leaves rows r < seqlen_q - seqlen_k - right without keys (causal: the
// first seqlen_q - seqlen_k rows): their O is 0 and their LSE -inf (the sink's
// logit with sinks). row < seqlen_q and key < seqlen_k (< 2^31, as the kernels
// require).
inline bool key_visible(int64_t row, int64_t key, int64_t seqlen_q, int64_t seqlen_k,
                        const AttentionOptions& options) {
  return row_mask(seqlen_q, seqlen_k, options).visible(static_cast<int>(row), static_cast<int>(key));
}

// Bottom-right aligned causal mask (FlashAttention 2/3): query row i sees key
// j iff j <= i + seqlen_k - seqlen_q; without causal every key.
inline bool key_visible(int64_t row, int64_t key, int64_t seqlen_q, int64_t seqlen_k, bool causal) {
  return key_visible(row, key, seqlen_q, seqlen_k, causal_options(causal));
}

struct ForwardResult {
  std::vector<double> out;
  std::vector<double> lse;
};

struct Gradients {
  std::vector<double> dq, dk, dv;
  std::vector<double> dsinks;  // heads_q values with sinks (summed over batch and rows), else empty
};

ForwardResult attention_forward(const ProblemShape& shape, const AttentionOptions& options, double softmax_scale,
                                const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& v);

// Gradients of sum(out * dout) with respect to q, k, v (and the sinks). For
// GQA/MQA dk and dv sum over the q-heads of each group. With D = dout . out
// per row: dS = P (dP - D), times 1 - tanh^2(s / softcap) under a softcap,
// and d sink_h = -sum over the rows of head h of exp(sink_h - lse) D.
// stored_out (optional): the out a FlashAttention-style backward reads (its
// input, e.g. the forward's bf16 result): D is then rowsum(dout * stored_out),
// the kernels' contract, instead of the exact out's. For a row with one key
// at hdim 256 the bf16 rounding of out alone moves dq by up to ~0.07
// (unit-normal inputs), more than a naive attention's error on that row.
Gradients attention_backward(const ProblemShape& shape, const AttentionOptions& options, double softmax_scale,
                             const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const std::vector<double>& dout,
                             const std::vector<double>* stored_out = nullptr);

// No mask or causal, no softcap, no sinks: causal_options(causal).
ForwardResult attention_forward(const ProblemShape& shape, bool causal, double softmax_scale,
                                const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& v);
Gradients attention_backward(const ProblemShape& shape, bool causal, double softmax_scale,
                             const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const std::vector<double>& dout);

// Element counts of the dense tensors above.
inline int64_t q_elements(const ProblemShape& s) { return s.batch * s.seqlen_q * s.heads_q * s.head_dim; }
inline int64_t kv_elements(const ProblemShape& s) { return s.batch * s.seqlen_k * s.heads_kv * s.head_dim; }
inline int64_t lse_elements(const ProblemShape& s) { return s.batch * s.heads_q * s.seqlen_q; }

}  // namespace dash_attn::reference
