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

// One row in the kernels' precision: rounded probabilities (0 for masked
// keys), the softcap's tanh slope per visible key, the sink's rounded
// probability; returns the fp32 LSE.
struct NaiveRow {
  std::vector<float> p, slope;
  float sink_p = 0.0f;
  explicit NaiveRow(int64_t seqlen_k) : p(seqlen_k), slope(seqlen_k) {}
};

float naive_row(const Rounder& round, const ProblemShape& s, const mask::MaskGeometry& rows,
                const AttentionOptions& o, float scale, const std::vector<double>& q, const std::vector<double>& k,
                int64_t b, int64_t h, int64_t i, NaiveRow& row) {
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  const float softcap = static_cast<float>(o.softcap);
  std::vector<float>& p = row.p;
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!rows.visible(static_cast<int>(i), static_cast<int>(j))) {
      p[j] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float dot = 0.0f;
    for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<float>(q[qi(b, i, h, d)] * k[ki(b, j, hk, d)]);
    p[j] = round(round(dot) * scale);
    if (o.softcap > 0.0) {  // an unfused softcap: tanh of the rounded scores, rounded
      const float t = std::tanh(p[j] / softcap);
      p[j] = round(softcap * t);
      row.slope[j] = 1.0f - t * t;
    }
    max_score = std::max(max_score, p[j]);
  }
  // The sink's fp32 logit joins the softmax as one more column (transformers' eager sinks).
  const float sink = o.sinks ? o.sinks[h] : -std::numeric_limits<float>::infinity();
  const float max_logit = std::max(max_score, sink);
  row.sink_p = 0.0f;
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    std::fill(p.begin(), p.end(), 0.0f);
    return max_logit;
  }
  float sum = 0.0f;
  for (float& x : p) {
    x = std::exp(x - max_logit);
    sum += x;
  }
  const float sink_weight = o.sinks ? std::exp(sink - max_logit) : 0.0f;
  if (o.sinks) sum += sink_weight;
  for (float& x : p) x = round(x / sum);
  row.sink_p = round(sink_weight / sum);
  return max_logit + std::log(sum);
}

}  // namespace

double round_to(DType dtype, double value) { return Rounder{dtype}(static_cast<float>(value)); }

ForwardResult naive_forward(DType dtype, const ProblemShape& s, const AttentionOptions& o, double scale,
                            const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v) {
  const Rounder round{dtype};
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const mask::MaskGeometry rows = row_mask(s.seqlen_q, s.seqlen_k, o);
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  NaiveRow row(s.seqlen_k);
  std::vector<float> acc(s.head_dim);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] =
            naive_row(round, s, rows, o, static_cast<float>(scale), q, k, b, h, i, row);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < s.seqlen_k; ++j)
          for (int64_t d = 0; d < s.head_dim; ++d) acc[d] += row.p[j] * static_cast<float>(v[ki(b, j, hk, d)]);
        for (int64_t d = 0; d < s.head_dim; ++d) r.out[qi(b, i, h, d)] = round(acc[d]);
      }
    }
  return r;
}

Gradients naive_backward(DType dtype, const ProblemShape& s, const AttentionOptions& o, double scale,
                         const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const std::vector<double>& dout) {
  const Rounder round{dtype};
  const DenseLayout qi{s.seqlen_q, s.heads_q, s.head_dim}, ki{s.seqlen_k, s.heads_kv, s.head_dim};
  const mask::MaskGeometry rows = row_mask(s.seqlen_q, s.seqlen_k, o);
  std::vector<float> dq(q_elements(s), 0.0f), dk(kv_elements(s), 0.0f), dv(kv_elements(s), 0.0f);
  std::vector<float> dsinks(o.sinks ? s.heads_q : 0, 0.0f);
  NaiveRow row(s.seqlen_k);
  std::vector<float> dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        naive_row(round, s, rows, o, static_cast<float>(scale), q, k, b, h, i, row);
        const std::vector<float>& p = row.p;
        float row_d = 0.0f;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          float dot = 0.0f;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<float>(dout[qi(b, i, h, d)] * v[ki(b, j, hk, d)]);
          dp[j] = round(dot);
          row_d += p[j] * dp[j];
        }
        if (o.sinks) dsinks[h] -= row.sink_p * row_d;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          float ds = round(p[j] * (dp[j] - row_d));
          if (o.softcap > 0.0 && p[j] != 0.0f) ds = round(ds * row.slope[j]);  // then through the tanh
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
  g.dsinks.assign(dsinks.begin(), dsinks.end());  // fp32, not rounded to the dtype
  return g;
}

ForwardResult naive_forward(DType dtype, const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v) {
  return naive_forward(dtype, s, causal_options(causal), scale, q, k, v);
}

Gradients naive_backward(DType dtype, const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                         const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& dout) {
  return naive_backward(dtype, s, causal_options(causal), scale, q, k, v, dout);
}

}  // namespace dash_attn::reference
