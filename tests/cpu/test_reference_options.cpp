// The fp64 reference's options (issue 18): sliding window, softcap and
// attention sinks. Forward against a textbook formulation that states the
// window rule itself, backward (dq, dk, dv, dsinks) against central finite
// differences of the forward, the naive same-precision version against the
// reference; and the identities that tie the options to what was there
// before: window (-1, 0) is causal, (-1, -1) no mask, and the defaults give
// the pre-issue-18 results bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "common/compare.hpp"

namespace dash_attn::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_values(std::mt19937_64& rng, int64_t count) {
  std::normal_distribution<double> normal;
  std::vector<double> values(count);
  for (double& x : values) x = normal(rng);
  return values;
}

// Sink logits on a grid of 2^-10, so that sink +- 2^-16 is exact in fp32 (the
// finite differences step the fp32 sinks).
std::vector<float> random_sinks(std::mt19937_64& rng, int64_t heads) {
  std::normal_distribution<double> normal(0.5, 1.0);
  std::vector<float> sinks(heads);
  for (float& x : sinks) x = static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(normal(rng), 10)), -10));
  return sinks;
}

// Index of (b, s, h, d) in a dense (batch, seq, head, dim) tensor, written out
// here rather than taken from the reference.
int64_t at(int64_t seqlen, int64_t heads, int64_t dim, int64_t b, int64_t s, int64_t h, int64_t d) {
  return ((b * seqlen + s) * heads + h) * dim + d;
}

struct Case {
  ProblemShape shape;
  int left, right;  // FlashAttention's window_size
};

void PrintTo(const Case& c, std::ostream* out) {
  const ProblemShape& s = c.shape;
  *out << "window (" << c.left << ", " << c.right << ") b" << s.batch << " q" << s.seqlen_q << " k" << s.seqlen_k
       << " h" << s.heads_q << "/" << s.heads_kv << " d" << s.head_dim;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const auto bound = [](int x) { return x < 0 ? std::string("inf") : std::to_string(x); };
  return "q" + std::to_string(c.shape.seqlen_q) + "_k" + std::to_string(c.shape.seqlen_k) + "_h" +
         std::to_string(c.shape.heads_q) + "x" + std::to_string(c.shape.heads_kv) + "_w" + bound(c.left) + "_" +
         bound(c.right);
}

std::vector<Case> cases() {
  const ProblemShape shapes[] = {
      {2, 5, 7, 4, 2, 3},  // seqlen_q < seqlen_k, GQA 4/2
      {1, 7, 4, 4, 2, 3},  // seqlen_q > seqlen_k: windows with a right bound leave the first rows empty
      {1, 6, 6, 2, 1, 4},  // square, MQA
  };
  const std::pair<int, int> windows[] = {{0, 0},  {1, 0},  {0, 1},  {3, 2},   {1, 4},
                                         {2, -1}, {-1, 1}, {50, 50}, {-1, 0}, {-1, -1}};
  std::vector<Case> all;
  for (const ProblemShape& s : shapes)
    for (const auto& [left, right] : windows) all.push_back(Case{s, left, right});
  return all;
}

// The options of one test problem: the case's window, a softcap or none, the
// sinks or none.
AttentionOptions options_of(const Case& c, double softcap, const std::vector<float>* sinks) {
  return AttentionOptions{c.left, c.right, softcap, sinks ? sinks->data() : nullptr};
}

struct Variant {
  double softcap;
  bool sinks;
};
constexpr Variant kVariants[] = {{0.0, false}, {0.0, true}, {5.0, false}, {5.0, true}};

std::string variant_name(const Variant& v) {
  return std::string("softcap ") + std::to_string(v.softcap) + (v.sinks ? ", sinks" : ", no sinks");
}

// FlashAttention's rule as its docs state it, not mask::MaskGeometry.
bool rule_visible(int64_t row, int64_t key, int64_t seqlen_q, int64_t seqlen_k, int left, int right) {
  const int64_t diagonal = row + seqlen_k - seqlen_q;
  return (left < 0 || key >= diagonal - left) && (right < 0 || key <= diagonal + right);
}

// Softmax over the visible keys plus the sink, exp without a max (safe at these
// magnitudes): lse = log(exp(sink) + sum_j exp(s_j)), out = sum_j exp(s_j) / Z v_j.
ForwardResult textbook_forward(const ProblemShape& s, int left, int right, double softcap, const float* sinks,
                               double scale, const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v) {
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h * s.heads_kv / s.heads_q;
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        std::vector<double> weight(s.seqlen_k, 0.0);
        double total = sinks ? std::exp(static_cast<double>(sinks[h])) : 0.0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (!rule_visible(i, j, s.seqlen_q, s.seqlen_k, left, right)) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d)
            dot += q[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] *
                   k[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)];
          const double score = softcap > 0 ? softcap * std::tanh(scale * dot / softcap) : scale * dot;
          weight[j] = std::exp(score);
          total += weight[j];
        }
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = std::log(total);  // log(0) = -inf
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (weight[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d)
            r.out[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] +=
                weight[j] / total * v[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)];
        }
      }
    }
  return r;
}

// Random inputs of one problem.
struct Inputs {
  std::vector<double> q, k, v, dout;
  std::vector<float> sinks;
  Inputs(const ProblemShape& s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    q = random_values(rng, q_elements(s));
    k = random_values(rng, kv_elements(s));
    v = random_values(rng, kv_elements(s));
    dout = random_values(rng, q_elements(s));
    sinks = random_sinks(rng, s.heads_q);
  }
};

constexpr double kScale = 0.9;  // with head_dim 3-4 the scores reach the softcap's bend

class ReferenceOptions : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceOptions, ForwardMatchesTextbook) {
  const Case c = GetParam();
  const Inputs in(c.shape, 17);
  for (const Variant& variant : kVariants) {
    SCOPED_TRACE(variant_name(variant));
    const AttentionOptions o = options_of(c, variant.softcap, variant.sinks ? &in.sinks : nullptr);
    const ForwardResult r = attention_forward(c.shape, o, kScale, in.q, in.k, in.v);
    const ForwardResult t = textbook_forward(c.shape, c.left, c.right, o.softcap, o.sinks, kScale, in.q, in.k, in.v);
    EXPECT_LT(testing::max_abs_error(r.out, t.out), 1e-12);
    for (size_t i = 0; i < t.lse.size(); ++i) {
      if (std::isinf(t.lse[i])) {
        EXPECT_EQ(r.lse[i], t.lse[i]) << "lse " << i;
      } else {
        EXPECT_NEAR(r.lse[i], t.lse[i], 1e-12) << "lse " << i;
      }
    }
  }
}

// Loss whose gradient the backward computes: sum(out * dout).
double loss(const ProblemShape& s, const AttentionOptions& o, const Inputs& in) {
  const ForwardResult f = attention_forward(s, o, kScale, in.q, in.k, in.v);
  double sum = 0.0;
  for (size_t i = 0; i < f.out.size(); ++i) sum += f.out[i] * in.dout[i];
  return sum;
}

// Central differences of `evaluate` along every element of x.
template <class T>
std::vector<double> finite_differences(std::vector<T>& x, T step, const std::function<double()>& evaluate) {
  std::vector<double> gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const T saved = x[i];
    x[i] = saved + step;
    const double up = evaluate();
    x[i] = saved - step;
    const double down = evaluate();
    x[i] = saved;
    gradient[i] = (up - down) / (2.0 * static_cast<double>(step));
  }
  return gradient;
}

TEST_P(ReferenceOptions, GradientsMatchFiniteDifferences) {
  const Case c = GetParam();
  Inputs in(c.shape, 23);
  for (const Variant& variant : kVariants) {
    SCOPED_TRACE(variant_name(variant));
    const AttentionOptions o = options_of(c, variant.softcap, variant.sinks ? &in.sinks : nullptr);
    const Gradients g = attention_backward(c.shape, o, kScale, in.q, in.k, in.v, in.dout);
    const auto evaluate = [&] { return loss(c.shape, o, in); };
    EXPECT_LT(testing::max_abs_error(g.dq, finite_differences(in.q, 1e-5, evaluate)), 1e-7);
    EXPECT_LT(testing::max_abs_error(g.dk, finite_differences(in.k, 1e-5, evaluate)), 1e-7);
    EXPECT_LT(testing::max_abs_error(g.dv, finite_differences(in.v, 1e-5, evaluate)), 1e-7);
    if (variant.sinks) {
      ASSERT_EQ(g.dsinks.size(), static_cast<size_t>(c.shape.heads_q));
      // o.sinks points at in.sinks, so stepping in.sinks steps the forward's sinks.
      EXPECT_LT(testing::max_abs_error(g.dsinks, finite_differences(in.sinks, std::ldexp(1.0f, -16), evaluate)), 1e-7);
    } else {
      EXPECT_TRUE(g.dsinks.empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, ReferenceOptions, ::testing::ValuesIn(cases()), case_name);

// The two empty-row conventions: no key and no sink gives out = 0, lse = -inf;
// no key with a sink gives out = 0, lse = sink; either way no gradient flows.
TEST(ReferenceOptionsRows, RowsThatSeeNoKey) {
  const ProblemShape s{2, 7, 4, 4, 2, 3};  // offset -3: window (0, 0) leaves rows 0-2 empty, (0, 1) rows 0-1
  const Inputs in(s, 5);
  for (const auto& [left, right, empty_rows] : {std::tuple{0, 0, 3}, std::tuple{0, 1, 2}, std::tuple{-1, 0, 3}})
    for (const Variant& variant : kVariants) {
      SCOPED_TRACE(variant_name(variant) + ", window (" + std::to_string(left) + ", " + std::to_string(right) + ")");
      const AttentionOptions o{left, right, variant.softcap, variant.sinks ? in.sinks.data() : nullptr};
      const ForwardResult r = attention_forward(s, o, kScale, in.q, in.k, in.v);
      const Gradients g = attention_backward(s, o, kScale, in.q, in.k, in.v, in.dout);
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < s.heads_q; ++h)
          for (int64_t i = 0; i < s.seqlen_q; ++i) {
            const double lse = r.lse[(b * s.heads_q + h) * s.seqlen_q + i];
            int visible_keys = 0;
            for (int64_t j = 0; j < s.seqlen_k; ++j) visible_keys += key_visible(i, j, s.seqlen_q, s.seqlen_k, o);
            EXPECT_EQ(visible_keys == 0, i < empty_rows) << "row " << i;
            if (i >= empty_rows) {
              EXPECT_TRUE(std::isfinite(lse)) << b << " " << h << " " << i;
              continue;
            }
            EXPECT_EQ(lse, variant.sinks ? static_cast<double>(in.sinks[h]) : -kInf) << b << " " << h << " " << i;
            for (int64_t d = 0; d < s.head_dim; ++d) {
              EXPECT_EQ(r.out[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)], 0.0);
              EXPECT_EQ(g.dq[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)], 0.0);
            }
          }
      for (const double x : g.dsinks) EXPECT_TRUE(std::isfinite(x));
    }
}

void expect_bitwise(const ForwardResult& a, const ForwardResult& b) {
  EXPECT_TRUE(testing::bitwise_equal(a.out, b.out, {static_cast<int64_t>(a.out.size())})) << "out";
  EXPECT_TRUE(testing::bitwise_equal(a.lse, b.lse, {static_cast<int64_t>(a.lse.size())})) << "lse";
}

void expect_bitwise(const Gradients& a, const Gradients& b) {
  EXPECT_TRUE(testing::bitwise_equal(a.dq, b.dq, {static_cast<int64_t>(a.dq.size())})) << "dq";
  EXPECT_TRUE(testing::bitwise_equal(a.dk, b.dk, {static_cast<int64_t>(a.dk.size())})) << "dk";
  EXPECT_TRUE(testing::bitwise_equal(a.dv, b.dv, {static_cast<int64_t>(a.dv.size())})) << "dv";
  EXPECT_TRUE(testing::bitwise_equal(a.dsinks, b.dsinks, {static_cast<int64_t>(a.dsinks.size())})) << "dsinks";
}

const ProblemShape kIdentityShapes[] = {{2, 5, 7, 4, 2, 4}, {1, 9, 4, 2, 1, 3}, {1, 11, 11, 2, 2, 8}};

// Window (-1, 0) is causal and (-1, -1) no mask, exactly; so is any window
// whose bounds reach past the sequences (sliding_window drops them), with a
// softcap and sinks too.
TEST(ReferenceOptionsIdentities, WindowsThatAreCausalOrNoMask) {
  for (const ProblemShape& s : kIdentityShapes) {
    const Inputs in(s, 31);
    for (const Variant& variant : kVariants)
      for (const bool causal : {false, true}) {
        SCOPED_TRACE(variant_name(variant) + (causal ? ", causal" : ", no mask") + ", q" +
                     std::to_string(s.seqlen_q) + " k" + std::to_string(s.seqlen_k));
        const float* sinks = variant.sinks ? in.sinks.data() : nullptr;
        const AttentionOptions base{-1, causal ? 0 : -1, variant.softcap, sinks};
        const int far = static_cast<int>(s.seqlen_q + s.seqlen_k);
        for (const AttentionOptions& o : {AttentionOptions{-1, causal ? 0 : -1, variant.softcap, sinks},
                                          AttentionOptions{far, causal ? 0 : far, variant.softcap, sinks},
                                          AttentionOptions{static_cast<int>(s.seqlen_k), causal ? 0 : static_cast<int>(s.seqlen_q),
                                                           variant.softcap, sinks}}) {
          expect_bitwise(attention_forward(s, o, kScale, in.q, in.k, in.v),
                         attention_forward(s, base, kScale, in.q, in.k, in.v));
          expect_bitwise(attention_backward(s, o, kScale, in.q, in.k, in.v, in.dout),
                         attention_backward(s, base, kScale, in.q, in.k, in.v, in.dout));
        }
        if (variant.softcap == 0.0 && !variant.sinks) {  // the bool overloads
          expect_bitwise(attention_forward(s, causal, kScale, in.q, in.k, in.v),
                         attention_forward(s, base, kScale, in.q, in.k, in.v));
          expect_bitwise(attention_backward(s, causal, kScale, in.q, in.k, in.v, in.dout),
                         attention_backward(s, base, kScale, in.q, in.k, in.v, in.dout));
          for (const DType dtype : {DType::kBF16, DType::kFP16}) {
            expect_bitwise(naive_forward(dtype, s, causal, kScale, in.q, in.k, in.v),
                           naive_forward(dtype, s, base, kScale, in.q, in.k, in.v));
            expect_bitwise(naive_backward(dtype, s, causal, kScale, in.q, in.k, in.v, in.dout),
                           naive_backward(dtype, s, base, kScale, in.q, in.k, in.v, in.dout));
          }
        }
      }
  }
}

// A sink of -inf is no sink: the same results bit for bit, and a zero gradient.
TEST(ReferenceOptionsIdentities, MinusInfinitySinkIsNoSink) {
  const ProblemShape s{1, 7, 4, 4, 2, 3};
  const Inputs in(s, 37);
  const std::vector<float> none(s.heads_q, -std::numeric_limits<float>::infinity());
  for (const double softcap : {0.0, 5.0}) {
    const AttentionOptions with{0, 1, softcap, none.data()}, without{0, 1, softcap, nullptr};
    expect_bitwise(attention_forward(s, with, kScale, in.q, in.k, in.v),
                   attention_forward(s, without, kScale, in.q, in.k, in.v));
    Gradients g = attention_backward(s, with, kScale, in.q, in.k, in.v, in.dout);
    for (const double x : g.dsinks) EXPECT_EQ(x, 0.0);
    g.dsinks.clear();
    expect_bitwise(g, attention_backward(s, without, kScale, in.q, in.k, in.v, in.dout));
  }
}

// ---- the reference and the naive version as they were before issue 18 (reference/ at 959106c), frozen ----
namespace legacy {

std::vector<double> row_probabilities(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                                      const std::vector<double>& k, int64_t b, int64_t h, int64_t i, double& lse) {
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  std::vector<double> p(s.seqlen_k);
  double max_score = -kInf;
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!rule_visible(i, j, s.seqlen_q, s.seqlen_k, -1, causal ? 0 : -1)) {
      p[j] = -kInf;
      continue;
    }
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d)
      dot += q[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] * k[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)];
    p[j] = dot * scale;
    max_score = std::max(max_score, p[j]);
  }
  if (max_score == -kInf) {
    std::fill(p.begin(), p.end(), 0.0);
    lse = -kInf;
    return p;
  }
  double sum = 0.0;
  for (double& x : p) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (double& x : p) x /= sum;
  lse = max_score + std::log(sum);
  return p;
}

ForwardResult forward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                      const std::vector<double>& k, const std::vector<double>& v) {
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        const std::vector<double> p =
            row_probabilities(s, causal, scale, q, k, b, h, i, r.lse[(b * s.heads_q + h) * s.seqlen_q + i]);
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d)
            r.out[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] +=
                p[j] * v[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)];
        }
      }
    }
  return r;
}

Gradients backward(const ProblemShape& s, bool causal, double scale, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& dout) {
  Gradients g{std::vector<double>(q_elements(s), 0.0), std::vector<double>(kv_elements(s), 0.0),
              std::vector<double>(kv_elements(s), 0.0), {}};
  std::vector<double> dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        double lse;
        const std::vector<double> p = row_probabilities(s, causal, scale, q, k, b, h, i, lse);
        const auto qi = [&](int64_t d) { return at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d); };
        const auto ki = [&](int64_t j, int64_t d) { return at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d); };
        double row_d = 0.0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          dp[j] = 0.0;
          if (p[j] == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) dp[j] += dout[qi(d)] * v[ki(j, d)];
          row_d += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (p[j] == 0.0) continue;
          const double ds = p[j] * (dp[j] - row_d) * scale;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            g.dv[ki(j, d)] += p[j] * dout[qi(d)];
            g.dq[qi(d)] += ds * k[ki(j, d)];
            g.dk[ki(j, d)] += ds * q[qi(d)];
          }
        }
      }
    }
  return g;
}

std::vector<float> naive_row(DType dtype, const ProblemShape& s, bool causal, float scale, const std::vector<double>& q,
                             const std::vector<double>& k, int64_t b, int64_t h, int64_t i, float& lse) {
  const auto round = [dtype](float x) { return static_cast<float>(round_to(dtype, x)); };
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  std::vector<float> p(s.seqlen_k);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!rule_visible(i, j, s.seqlen_q, s.seqlen_k, -1, causal ? 0 : -1)) {
      p[j] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float dot = 0.0f;
    for (int64_t d = 0; d < s.head_dim; ++d)
      dot += static_cast<float>(q[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] *
                                k[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)]);
    p[j] = round(round(dot) * scale);
    max_score = std::max(max_score, p[j]);
  }
  if (max_score == -std::numeric_limits<float>::infinity()) {
    std::fill(p.begin(), p.end(), 0.0f);
    lse = max_score;
    return p;
  }
  float sum = 0.0f;
  for (float& x : p) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (float& x : p) x = round(x / sum);
  lse = max_score + std::log(sum);
  return p;
}

ForwardResult naive_forward(DType dtype, const ProblemShape& s, bool causal, double scale,
                            const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v) {
  ForwardResult r{std::vector<double>(q_elements(s), 0.0), std::vector<double>(lse_elements(s), 0.0)};
  std::vector<float> acc(s.head_dim);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        float lse;
        const std::vector<float> p = naive_row(dtype, s, causal, static_cast<float>(scale), q, k, b, h, i, lse);
        r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = lse;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < s.seqlen_k; ++j)
          for (int64_t d = 0; d < s.head_dim; ++d)
            acc[d] += p[j] * static_cast<float>(v[at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d)]);
        for (int64_t d = 0; d < s.head_dim; ++d)
          r.out[at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d)] = static_cast<float>(round_to(dtype, acc[d]));
      }
    }
  return r;
}

Gradients naive_backward(DType dtype, const ProblemShape& s, bool causal, double scale,
                         const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const std::vector<double>& dout) {
  const auto round = [dtype](float x) { return static_cast<float>(round_to(dtype, x)); };
  std::vector<float> dq(q_elements(s), 0.0f), dk(kv_elements(s), 0.0f), dv(kv_elements(s), 0.0f);
  std::vector<float> dp(s.seqlen_k);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        float lse;
        const std::vector<float> p = naive_row(dtype, s, causal, static_cast<float>(scale), q, k, b, h, i, lse);
        const auto qi = [&](int64_t d) { return at(s.seqlen_q, s.heads_q, s.head_dim, b, i, h, d); };
        const auto ki = [&](int64_t j, int64_t d) { return at(s.seqlen_k, s.heads_kv, s.head_dim, b, j, hk, d); };
        float row_d = 0.0f;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          float dot = 0.0f;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<float>(dout[qi(d)] * v[ki(j, d)]);
          dp[j] = round(dot);
          row_d += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          const float ds = round(p[j] * (dp[j] - row_d));
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dv[ki(j, d)] += p[j] * static_cast<float>(dout[qi(d)]);
            dq[qi(d)] += ds * static_cast<float>(scale * k[ki(j, d)]);
            dk[ki(j, d)] += ds * static_cast<float>(scale * q[qi(d)]);
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

}  // namespace legacy

// No window, softcap 0 and no sinks: what the reference and the naive version
// computed before the options existed, bit for bit.
TEST(ReferenceOptionsIdentities, DefaultsGiveThePreviousResultsBitwise) {
  const ProblemShape shapes[] = {{2, 5, 7, 4, 2, 4}, {1, 9, 4, 2, 1, 3}, {1, 7, 5, 3, 3, 4},
                                 {1, 1, 1, 2, 1, 5}, {1, 33, 47, 2, 1, 16}};
  for (const ProblemShape& s : shapes) {
    const Inputs in(s, 41);
    for (const bool causal : {false, true}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "no mask") + ", q" + std::to_string(s.seqlen_q) + " k" +
                   std::to_string(s.seqlen_k));
      const AttentionOptions o = causal ? AttentionOptions{-1, 0} : AttentionOptions{};
      expect_bitwise(legacy::forward(s, causal, 0.37, in.q, in.k, in.v), attention_forward(s, o, 0.37, in.q, in.k, in.v));
      expect_bitwise(legacy::backward(s, causal, 0.37, in.q, in.k, in.v, in.dout),
                     attention_backward(s, o, 0.37, in.q, in.k, in.v, in.dout));
      for (const DType dtype : {DType::kBF16, DType::kFP16}) {
        expect_bitwise(legacy::naive_forward(dtype, s, causal, 0.37, in.q, in.k, in.v),
                       naive_forward(dtype, s, o, 0.37, in.q, in.k, in.v));
        expect_bitwise(legacy::naive_backward(dtype, s, causal, 0.37, in.q, in.k, in.v, in.dout),
                       naive_backward(dtype, s, o, 0.37, in.q, in.k, in.v, in.dout));
      }
    }
  }
}

// The softcap bounds every score by softcap, so lse <= softcap + log(keys (+1
// with a sink's logit below the cap)), however large the scale; and it changes
// the results where scores reach its bend.
TEST(ReferenceOptionsSoftcap, BoundsTheScores) {
  const ProblemShape s{1, 6, 9, 2, 1, 8};
  const Inputs in(s, 43);
  const std::vector<float> sinks(s.heads_q, 1.0f);
  for (const float* sink : {static_cast<const float*>(nullptr), sinks.data()}) {
    const ForwardResult r = attention_forward(s, AttentionOptions{2, 1, 5.0, sink}, 100.0, in.q, in.k, in.v);
    for (const double lse : r.lse) EXPECT_LE(lse, 5.0 + std::log(4.0 + (sink ? 1 : 0)) + 1e-12);
    for (const double x : r.out) EXPECT_TRUE(std::isfinite(x));
  }
  const ForwardResult capped = attention_forward(s, AttentionOptions{-1, -1, 5.0}, 1.0, in.q, in.k, in.v);
  const ForwardResult plain = attention_forward(s, AttentionOptions{}, 1.0, in.q, in.k, in.v);
  EXPECT_GT(testing::max_abs_error(capped.out, plain.out), 1e-2);
  EXPECT_THROW(attention_forward(s, AttentionOptions{-1, -1, -1.0}, 1.0, in.q, in.k, in.v), std::invalid_argument);
}

// The naive same-precision version with the options stays near the reference
// (its error is the yardstick of the kernels' accuracy rule), without being it.
TEST(NaiveLowPrecisionOptions, ErrorIsSmallButNonZero) {
  const ProblemShape shapes[] = {{1, 33, 47, 4, 2, 16}, {1, 40, 25, 4, 2, 16}};
  for (const ProblemShape& s : shapes) {
    const Inputs in(s, 47);
    for (const auto& [left, right] : {std::pair{8, 3}, std::pair{5, 0}, std::pair{-1, 0}})
      for (const Variant& variant : kVariants) {
        SCOPED_TRACE(variant_name(variant) + ", window (" + std::to_string(left) + ", " + std::to_string(right) +
                     "), q" + std::to_string(s.seqlen_q));
        const AttentionOptions o{left, right, variant.softcap, variant.sinks ? in.sinks.data() : nullptr};
        const ForwardResult exact = attention_forward(s, o, 0.25, in.q, in.k, in.v);
        const Gradients g = attention_backward(s, o, 0.25, in.q, in.k, in.v, in.dout);
        for (const DType dtype : {DType::kBF16, DType::kFP16}) {
          const bool bf16 = dtype == DType::kBF16;
          const ForwardResult naive = naive_forward(dtype, s, o, 0.25, in.q, in.k, in.v);
          const double error = testing::max_abs_error(naive.out, exact.out);
          EXPECT_GT(error, 0.0);
          EXPECT_LT(error, bf16 ? 3e-2 : 5e-3);  // measured <= 1.3e-2 and 1.6e-3
          for (size_t i = 0; i < exact.lse.size(); ++i) {
            if (std::isinf(exact.lse[i])) {
              EXPECT_EQ(naive.lse[i], exact.lse[i]);
            } else {
              EXPECT_NEAR(naive.lse[i], exact.lse[i], bf16 ? 3e-2 : 5e-3);
            }
          }
          const Gradients gn = naive_backward(dtype, s, o, 0.25, in.q, in.k, in.v, in.dout);
          // measured <= 1.9e-2 and 2.3e-3 (dsinks 1.1e-2 and 2.3e-3 at |dsinks| up to 3.3)
          EXPECT_LT(testing::max_abs_error(gn.dq, g.dq), bf16 ? 5e-2 : 6e-3);
          EXPECT_LT(testing::max_abs_error(gn.dk, g.dk), bf16 ? 5e-2 : 6e-3);
          EXPECT_LT(testing::max_abs_error(gn.dv, g.dv), bf16 ? 5e-2 : 6e-3);
          ASSERT_EQ(gn.dsinks.size(), g.dsinks.size());
          if (variant.sinks) {
            EXPECT_LT(testing::max_abs_error(gn.dsinks, g.dsinks), bf16 ? 4e-2 : 6e-3);
          }
        }
      }
  }
}

}  // namespace
}  // namespace dash_attn::reference
