#include "attention_reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "dense_layout.hpp"

namespace dash_attn::reference {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

void check_options(const AttentionOptions& o) {
  if (!(o.softcap >= 0.0) || std::isinf(o.softcap))
    throw std::invalid_argument("attention reference: softcap must be finite and >= 0 (0: off)");
}

// Softmax of one (batch, head, row) over seqlen_k keys.
struct RowSoftmax {
  std::vector<double> p;      // probability of each key, 0 where hidden
  std::vector<double> slope;  // d score / d (scale q.k) of each visible key under a softcap: 1 - tanh^2
  double sink_p = 0.0;        // probability of the sink (0 without sinks)
  double lse = kMinusInfinity;

  explicit RowSoftmax(int64_t seqlen_k) : p(seqlen_k), slope(seqlen_k) {}
};

// Fills `row` for row i of (b, h); `rows` is the mask of (b, h).
void row_softmax(const ProblemShape& s, const mask::MaskGeometry& rows, const AttentionOptions& o, double scale,
                 const std::vector<double>& q, const std::vector<double>& k, int64_t b, int64_t h, int64_t i,
                 RowSoftmax& row) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  const int64_t begin = rows.col_begin(static_cast<int>(i)), end = rows.col_end(static_cast<int>(i));
  std::vector<double>& p = row.p;
  std::fill(p.begin(), p.end(), 0.0);
  double max_score = kMinusInfinity;
  for (int64_t j = begin; j < end; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) dot += q[qi(b, i, h, d)] * k[ki(b, j, hk, d)];
    p[j] = dot * scale;
    if (o.softcap > 0.0) {
      const double t = std::tanh(p[j] / o.softcap);
      p[j] = o.softcap * t;
      row.slope[j] = 1.0 - t * t;
    }
    max_score = std::max(max_score, p[j]);
  }
  const double sink = o.sinks ? static_cast<double>(o.sinks[h]) : kMinusInfinity;
  const double max_logit = std::max(max_score, sink);
  row.sink_p = 0.0;
  if (max_logit == kMinusInfinity) {  // no visible key and no sink
    std::fill(p.begin(), p.end(), 0.0);
    row.lse = kMinusInfinity;
    return;
  }
  double sum = 0.0;
  for (int64_t j = begin; j < end; ++j) {
    p[j] = std::exp(p[j] - max_logit);
    sum += p[j];
  }
  const double sink_weight = o.sinks ? std::exp(sink - max_logit) : 0.0;
  if (o.sinks) sum += sink_weight;
  for (int64_t j = begin; j < end; ++j) p[j] /= sum;
  row.sink_p = sink_weight / sum;
  row.lse = max_logit + std::log(sum);
}

}  // namespace

ForwardResult attention_forward(const ProblemShape& s, const AttentionOptions& o, double scale,
                                const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& v) {
  check_options(o);
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const mask::MaskGeometry rows = row_mask(s.seqlen_q, s.seqlen_k, o);
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  RowSoftmax row(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        row_softmax(s, rows, o, scale, q, k, b, h, i, row);
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = row.lse;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (row.p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) r.out[qi(b, i, h, d)] += row.p[j] * v[ki(b, j, hk, d)];
        }
      }
    }
  return r;
}

Gradients attention_backward(const ProblemShape& s, const AttentionOptions& o, double scale,
                             const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const std::vector<double>& dout,
                             const std::vector<double>* stored_out) {
  check_options(o);
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const mask::MaskGeometry rows = row_mask(s.seqlen_q, s.seqlen_k, o);
  Gradients g;
  g.dq.assign(q_elements(s), 0.0);
  g.dk.assign(kv_elements(s), 0.0);
  g.dv.assign(kv_elements(s), 0.0);
  if (o.sinks) g.dsinks.assign(s.heads_q, 0.0);
  RowSoftmax row(s.seqlen_k);
  std::vector<double> dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        row_softmax(s, rows, o, scale, q, k, b, h, i, row);
        const std::vector<double>& p = row.p;
        // dP = dO V^T; D = sum_j P dP = rowsum(dO * O) (the sink has no value);
        // dS = P (dP - D), through the cap's tanh; d sink = P_sink (0 - D).
        double row_d = 0.0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          dp[j] = 0.0;
          if (p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) dp[j] += dout[qi(b, i, h, d)] * v[ki(b, j, hk, d)];
          row_d += p[j] * dp[j];
        }
        if (stored_out != nullptr) {
          row_d = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) row_d += dout[qi(b, i, h, d)] * (*stored_out)[qi(b, i, h, d)];
        }
        if (o.sinks) g.dsinks[h] -= row.sink_p * row_d;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (p[j] == 0.0) continue;
          double ds = p[j] * (dp[j] - row_d);
          if (o.softcap > 0.0) ds *= row.slope[j];
          ds *= scale;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            g.dv[ki(b, j, hk, d)] += p[j] * dout[qi(b, i, h, d)];
            g.dq[qi(b, i, h, d)] += ds * k[ki(b, j, hk, d)];
            g.dk[ki(b, j, hk, d)] += ds * q[qi(b, i, h, d)];
          }
        }
      }
    }
  return g;
}

ForwardResult attention_forward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                                const std::vector<double>& k, const std::vector<double>& v) {
  return attention_forward(s, causal_options(causal), scale, q, k, v);
}

Gradients attention_backward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v,
                             const std::vector<double>& dout) {
  return attention_backward(s, causal_options(causal), scale, q, k, v, dout);
}

}  // namespace dash_attn::reference
