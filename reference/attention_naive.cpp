#include "attention_naive.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "dense_layout.hpp"

namespace dash_attn::reference {
namespace {

float round_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

// fp16: 11 significant bits, subnormals below 2^-14, overflow to inf above 65504.
float round_fp16(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int exponent;
  std::frexp(x, &exponent);
  const int quantum_exp = std::max(exponent, -13) - 11;
  const float rounded = std::ldexp(std::nearbyint(std::ldexp(x, -quantum_exp)), quantum_exp);
  return std::abs(rounded) > 65504.0f ? std::copysign(std::numeric_limits<float>::infinity(), x) : rounded;
}

struct Rounder {
  DType dtype;
  float operator()(float x) const { return dtype == DType::kBF16 ? round_bf16(x) : round_fp16(x); }
};

// Rounded probabilities of one row (0 for masked keys); returns the fp32 LSE.
float naive_row(const Rounder& round, const ProblemShape& s, bool causal, float scale, const std::vector<double>& q,
                const std::vector<double>& k, int64_t b, int64_t h, int64_t i, std::vector<float>& p) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!key_visible(i, j, s.seqlen_q, s.seqlen_k, causal)) {
      p[j] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float dot = 0.0f;
    for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<float>(q[qi(b, i, h, d)] * k[ki(b, j, hk, d)]);
    p[j] = round(round(dot) * scale);
    max_score = std::max(max_score, p[j]);
  }
  if (max_score == -std::numeric_limits<float>::infinity()) {
    std::fill(p.begin(), p.end(), 0.0f);
    return max_score;
  }
  float sum = 0.0f;
  for (float& x : p) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (float& x : p) x = round(x / sum);
  return max_score + std::log(sum);
}

}  // namespace

double round_to(DType dtype, double value) { return Rounder{dtype}(static_cast<float>(value)); }

ForwardResult naive_forward(DType dtype, const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v) {
  const Rounder round{dtype};
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  std::vector<float> p(s.seqlen_k), acc(s.head_dim);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = naive_row(round, s, causal, static_cast<float>(scale), q, k, b, h, i, p);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < s.seqlen_k; ++j)
          for (int64_t d = 0; d < s.head_dim; ++d) acc[d] += p[j] * static_cast<float>(v[ki(b, j, hk, d)]);
        for (int64_t d = 0; d < s.head_dim; ++d) r.out[qi(b, i, h, d)] = round(acc[d]);
      }
    }
  return r;
}

Gradients naive_backward(DType dtype, const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                         const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& dout) {
  const Rounder round{dtype};
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  std::vector<float> dq(q_elements(s), 0.0f), dk(kv_elements(s), 0.0f), dv(kv_elements(s), 0.0f);
  std::vector<float> p(s.seqlen_k), dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        naive_row(round, s, causal, static_cast<float>(scale), q, k, b, h, i, p);
        float row_d = 0.0f;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          float dot = 0.0f;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<float>(dout[qi(b, i, h, d)] * v[ki(b, j, hk, d)]);
          dp[j] = round(dot);
          row_d += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          const float ds = round(p[j] * (dp[j] - row_d));
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dv[ki(b, j, hk, d)] += p[j] * static_cast<float>(dout[qi(b, i, h, d)]);
            dq[qi(b, i, h, d)] += ds * static_cast<float>(scale * k[ki(b, j, hk, d)]);
            dk[ki(b, j, hk, d)] += ds * static_cast<float>(scale * q[qi(b, i, h, d)]);
          }
        }
      }
    }
  Gradients g;
  for (auto [from, to] : {std::pair{&dq, &g.dq}, std::pair{&dk, &g.dk}, std::pair{&dv, &g.dv}}) {
    to->resize(from->size());
    for (size_t i = 0; i < from->size(); ++i) (*to)[i] = round((*from)[i]);
  }
  return g;
}

}  // namespace dash_attn::reference
