// The fp64 reference: forward against a textbook softmax, backward against
// central finite differences of the forward, FA3's convention for empty rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "common/compare.hpp"
#include "common/masked_shape.hpp"

namespace dash_attn::reference {
namespace {

std::vector<double> random_values(std::mt19937_64& rng, int64_t count) {
  std::normal_distribution<double> normal;
  std::vector<double> values(count);
  for (double& x : values) x = normal(rng);
  return values;
}

using Problem = testing::MaskedShape;

// Loss whose gradient the backward computes: sum(out * dout).
double loss(const Problem& p, double scale, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v, const std::vector<double>& dout) {
  const ForwardResult f = attention_forward(p.shape, p.causal, scale, q, k, v);
  double sum = 0.0;
  for (size_t i = 0; i < f.out.size(); ++i) sum += f.out[i] * dout[i];
  return sum;
}

// Central differences of the loss along every element of `x` (q, k or v).
std::vector<double> finite_differences(const Problem& p, double scale, std::vector<double>& x,
                                       const std::function<double()>& evaluate) {
  constexpr double kStep = 1e-5;
  std::vector<double> gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double up = evaluate();
    x[i] = saved - kStep;
    const double down = evaluate();
    x[i] = saved;
    gradient[i] = (up - down) / (2 * kStep);
  }
  return gradient;
}

class ReferenceGradients : public ::testing::TestWithParam<Problem> {};

TEST_P(ReferenceGradients, MatchFiniteDifferences) {
  const Problem p = GetParam();
  std::mt19937_64 rng(42);
  std::vector<double> q = random_values(rng, q_elements(p.shape));
  std::vector<double> k = random_values(rng, kv_elements(p.shape));
  std::vector<double> v = random_values(rng, kv_elements(p.shape));
  const std::vector<double> dout = random_values(rng, q_elements(p.shape));
  const double scale = 0.7;
  const Gradients g = attention_backward(p.shape, p.causal, scale, q, k, v, dout);
  const auto evaluate = [&] { return loss(p, scale, q, k, v, dout); };
  EXPECT_LT(testing::max_abs_error(g.dq, finite_differences(p, scale, q, evaluate)), 1e-7);
  EXPECT_LT(testing::max_abs_error(g.dk, finite_differences(p, scale, k, evaluate)), 1e-7);
  EXPECT_LT(testing::max_abs_error(g.dv, finite_differences(p, scale, v, evaluate)), 1e-7);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceGradients,
    ::testing::Values(Problem{{2, 5, 7, 2, 2, 4}, false},   // full, seqlen_q < seqlen_k
                      Problem{{1, 9, 4, 2, 1, 3}, false},   // full, MQA, seqlen_q > seqlen_k
                      Problem{{2, 5, 7, 4, 2, 4}, true},    // causal, GQA, seqlen_q < seqlen_k
                      Problem{{1, 7, 5, 3, 3, 4}, true},    // causal with fully masked first rows
                      Problem{{1, 1, 1, 2, 1, 5}, true},    // seqlen 1
                      Problem{{1, 11, 11, 2, 2, 3}, true}), // square causal, odd length
    [](const ::testing::TestParamInfo<Problem>& info) {
      const ProblemShape& s = info.param.shape;
      return std::string(info.param.causal ? "causal" : "full") + "_q" + std::to_string(s.seqlen_q) + "_k" +
             std::to_string(s.seqlen_k) + "_h" + std::to_string(s.heads_q) + "x" + std::to_string(s.heads_kv);
    });

TEST(ReferenceForward, MatchesTextbookSoftmax) {
  const ProblemShape s{2, 6, 9, 4, 2, 8};
  std::mt19937_64 rng(7);
  const auto q = random_values(rng, q_elements(s)), k = random_values(rng, kv_elements(s)), v = random_values(rng, kv_elements(s));
  const double scale = 0.3;
  for (const bool causal : {false, true}) {
    const ForwardResult r = attention_forward(s, causal, scale, q, k, v);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seqlen_q; ++i) {
          // exp without max subtraction: a different formulation, safe at these magnitudes.
          std::vector<double> weight(s.seqlen_k, 0.0);
          double total = 0.0;
          const int64_t hk = h / (s.heads_q / s.heads_kv);
          for (int64_t j = 0; j < s.seqlen_k; ++j) {
            if (causal && j > i + s.seqlen_k - s.seqlen_q) continue;
            double dot = 0.0;
            for (int64_t d = 0; d < s.head_dim; ++d)
              dot += q[((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d] * k[((b * s.seqlen_k + j) * s.heads_kv + hk) * s.head_dim + d];
            weight[j] = std::exp(dot * scale);
            total += weight[j];
          }
          EXPECT_NEAR(r.lse[(b * s.heads_q + h) * s.seqlen_q + i], std::log(total), 1e-12);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            double o = 0.0;
            for (int64_t j = 0; j < s.seqlen_k; ++j) o += weight[j] / total * v[((b * s.seqlen_k + j) * s.heads_kv + hk) * s.head_dim + d];
            EXPECT_NEAR(r.out[((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d], o, 1e-12);
          }
        }
  }
}

TEST(ReferenceForward, FullyMaskedRowsGiveZeroOutputAndMinusInfinityLse) {
  // Bottom-right causal with seqlen_q = 6 > seqlen_k = 4: rows 0 and 1 see no key.
  const ProblemShape s{1, 6, 4, 1, 1, 4};
  std::mt19937_64 rng(3);
  const auto q = random_values(rng, q_elements(s)), k = random_values(rng, kv_elements(s)), v = random_values(rng, kv_elements(s));
  const auto dout = random_values(rng, q_elements(s));
  const ForwardResult r = attention_forward(s, true, 0.5, q, k, v);
  const Gradients g = attention_backward(s, true, 0.5, q, k, v, dout);
  for (int64_t row = 0; row < 2; ++row) {
    EXPECT_EQ(r.lse[row], -std::numeric_limits<double>::infinity());
    for (int64_t d = 0; d < s.head_dim; ++d) {
      EXPECT_EQ(r.out[row * s.head_dim + d], 0.0);
      EXPECT_EQ(g.dq[row * s.head_dim + d], 0.0);
    }
  }
  EXPECT_TRUE(std::isfinite(r.lse[2]));
  EXPECT_FALSE(key_visible(1, 0, 6, 4, true));
  EXPECT_TRUE(key_visible(2, 0, 6, 4, true));
  EXPECT_FALSE(key_visible(2, 1, 6, 4, true));
}

TEST(NaiveLowPrecision, RoundsLikeTheHardwareFormats) {
  EXPECT_EQ(round_to(DType::kBF16, 1.0 + 1.0 / 256), 1.0);            // ties to even
  EXPECT_EQ(round_to(DType::kBF16, 1.0 + 3.0 / 256), 1.0 + 4.0 / 256);
  EXPECT_EQ(round_to(DType::kFP16, 1.0 + 1.0 / 4096), 1.0);
  EXPECT_EQ(round_to(DType::kFP16, 1.0 + 3.0 / 2048), 1.0 + 2.0 / 1024);
  EXPECT_EQ(round_to(DType::kFP16, 70000.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::kFP16, 1e-7), std::ldexp(1.0, -24) * 2);  // subnormal grid of 2^-24
}

TEST(NaiveLowPrecision, ErrorIsSmallButNonZero) {
  const ProblemShape s{1, 33, 47, 2, 1, 16};
  std::mt19937_64 rng(11);
  const auto q = random_values(rng, q_elements(s)), k = random_values(rng, kv_elements(s)), v = random_values(rng, kv_elements(s));
  const auto dout = random_values(rng, q_elements(s));
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    const ForwardResult exact = attention_forward(s, true, 0.25, q, k, v);
    const ForwardResult naive = naive_forward(dtype, s, true, 0.25, q, k, v);
    const double error = testing::max_abs_error(naive.out, exact.out);
    EXPECT_GT(error, 0.0);
    EXPECT_LT(error, dtype == DType::kBF16 ? 5e-2 : 5e-3);
    const Gradients g = attention_backward(s, true, 0.25, q, k, v, dout);
    const Gradients gn = naive_backward(dtype, s, true, 0.25, q, k, v, dout);
    EXPECT_LT(testing::max_abs_error(gn.dq, g.dq), dtype == DType::kBF16 ? 0.2 : 2e-2);
    EXPECT_LT(testing::max_abs_error(gn.dv, g.dv), dtype == DType::kBF16 ? 0.2 : 2e-2);
  }
}

TEST(ToleranceRule, AcceptsWithinBoundAndRejectsNan) {
  const std::vector<double> reference{1.0, 2.0}, naive{1.1, 2.0};
  EXPECT_TRUE(testing::within_fa3_tolerance({1.15, 2.0}, naive, reference, 2.0, 0.0));
  EXPECT_FALSE(testing::within_fa3_tolerance({1.3, 2.0}, naive, reference, 2.0, 0.0));
  EXPECT_FALSE(testing::within_fa3_tolerance({std::nan(""), 2.0}, naive, reference, 2.0, 1.0));
}

TEST(BitwiseHelper, ReportsCountAndFirstCoordinate) {
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{1, 2, 3, 4, 0, 0};
  const ::testing::AssertionResult r = testing::bitwise_equal(a, b, {2, 3});
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("2 of 6 elements differ"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("(1, 1)"), std::string::npos) << r.message();
  EXPECT_TRUE(testing::bitwise_equal(a, a, {6}));
  // -0.0 and 0.0 compare equal as numbers but not bitwise.
  EXPECT_FALSE(testing::bitwise_equal(std::vector<float>{0.0f}, std::vector<float>{-0.0f}, {1}));
}

}  // namespace
}  // namespace dash_attn::reference
