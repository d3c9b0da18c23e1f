#include "attention_reference.hpp"

#include <cmath>
#include <limits>

#include "dense_layout.hpp"

namespace dash_attn::reference {
namespace {

// Softmax probabilities of one (batch, head, row): p[j] over seqlen_k keys,
// masked keys get 0. Returns the natural-log LSE (-inf for an empty row).
double row_probabilities(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                         const std::vector<double>& k, int64_t b, int64_t h, int64_t i, std::vector<double>& p) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!key_visible(i, j, s.seqlen_q, s.seqlen_k, causal)) {
      p[j] = -std::numeric_limits<double>::infinity();
      continue;
    }
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) dot += q[qi(b, i, h, d)] * k[ki(b, j, hk, d)];
    p[j] = dot * scale;
    max_score = std::max(max_score, p[j]);
  }
  if (max_score == -std::numeric_limits<double>::infinity()) {
    std::fill(p.begin(), p.end(), 0.0);
    return -std::numeric_limits<double>::infinity();
  }
  double sum = 0.0;
  for (double& x : p) {
    x = std::exp(x - max_score);  // exp(-inf) = 0 for masked keys
    sum += x;
  }
  for (double& x : p) x /= sum;
  return max_score + std::log(sum);
}

}  // namespace

ForwardResult attention_forward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                                const std::vector<double>& k, const std::vector<double>& v) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  std::vector<double> p(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = row_probabilities(s, causal, scale, q, k, b, h, i, p);
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) r.out[qi(b, i, h, d)] += p[j] * v[ki(b, j, hk, d)];
        }
      }
    }
  return r;
}

Gradients attention_backward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v,
                             const std::vector<double>& dout) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  Gradients g{std::vector<double>(q_elements(s), 0.0), std::vector<double>(kv_elements(s), 0.0),
              std::vector<double>(kv_elements(s), 0.0)};
  std::vector<double> p(s.seqlen_k), dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        row_probabilities(s, causal, scale, q, k, b, h, i, p);
        // dP = dO V^T; D = sum_j P dP = rowsum(dO * O); dS = P (dP - D).
        double row_d = 0.0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          dp[j] = 0.0;
          if (p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) dp[j] += dout[qi(b, i, h, d)] * v[ki(b, j, hk, d)];
          row_d += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (p[j] == 0.0) continue;
          const double ds = p[j] * (dp[j] - row_d) * scale;
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

}  // namespace dash_attn::reference
