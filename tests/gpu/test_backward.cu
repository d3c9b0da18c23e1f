// dash_attn::backward against the fp64 reference with FlashAttention-3's rule
// (error <= 2 x the error of a naive same-precision backward + atol), on fresh
// random inputs with poisoned outputs and workspace, for every schedule, over
// dtypes, head dims, masks, odd and unequal lengths, GQA/MQA and strides.
#include <algorithm>
#include <cmath>

#include "attention_naive.hpp"
#include "backward_harness.hpp"
#include "common/compare.hpp"

namespace dash_attn {
namespace {

using testing::BackwardCase;

constexpr ScheduleKind kSchedules[] = {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                       ScheduleKind::kShift, ScheduleKind::kSymmetricShift, ScheduleKind::kAuto};

struct ProblemCase {
  DType dtype;
  ProblemShape shape;
  bool causal;
  bool strided;
};

void PrintTo(const ProblemCase& c, std::ostream* out) {
  *out << testing::case_name(BackwardCase{c.dtype, c.shape, c.causal, ScheduleKind::kAuto, true, c.strided});
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

class BackwardAccuracy : public ::testing::TestWithParam<ProblemCase> {};

TEST_P(BackwardAccuracy, EverySchedule) {
  DASH_REQUIRE_SM90();
  const ProblemCase& pc = GetParam();
  const testing::BackwardProblem problem(BackwardCase{pc.dtype, pc.shape, pc.causal, ScheduleKind::kAuto, true, pc.strided},
                                         0x5eed + pc.shape.seqlen_q * 31 + pc.shape.head_dim);
  const reference::Gradients exact =
      reference::attention_backward(pc.shape, pc.causal, problem.scale, problem.q, problem.k, problem.v, problem.dout);
  const reference::Gradients naive = reference::naive_backward(pc.dtype, pc.shape, pc.causal, problem.scale, problem.q,
                                                               problem.k, problem.v, problem.dout);
  // A quarter of the dtype's epsilon, relative to the gradient's magnitude.
  const double quarter_eps = pc.dtype == DType::kBF16 ? 1e-3 : 1.25e-4;
  testing::BackwardRunner runner(problem);
  for (const ScheduleKind kind : kSchedules) {
    BackwardCase c{pc.dtype, pc.shape, pc.causal, kind, kind != ScheduleKind::kAtomic, pc.strided};
    SCOPED_TRACE(testing::case_name(c));
    Options o;
    o.causal = pc.causal;
    o.deterministic = c.deterministic;
    o.schedule = kind;
    runner.run(o);
    const testing::GradientBits bits = runner.bits();
    const auto dq = testing::bits_to_double(pc.dtype, bits.dq);
    const auto dk = testing::bits_to_double(pc.dtype, bits.dk);
    const auto dv = testing::bits_to_double(pc.dtype, bits.dv);
    EXPECT_TRUE(testing::within_fa3_tolerance(dq, naive.dq, exact.dq, 2.0, quarter_eps * std::max(1.0, max_abs(exact.dq))))
        << "dQ";
    EXPECT_TRUE(testing::within_fa3_tolerance(dk, naive.dk, exact.dk, 2.0, quarter_eps * std::max(1.0, max_abs(exact.dk))))
        << "dK";
    EXPECT_TRUE(testing::within_fa3_tolerance(dv, naive.dv, exact.dv, 2.0, quarter_eps * std::max(1.0, max_abs(exact.dv))))
        << "dV";
  }
}

std::vector<ProblemCase> accuracy_cases() {
  const ProblemShape shapes[] = {
      {1, 128, 128, 2, 2, 0},  // one tile
      {2, 77, 77, 3, 3, 0},    // partial tiles
      {1, 200, 333, 4, 1, 0},  // MQA, seqlen_q < seqlen_k
      {1, 333, 200, 4, 2, 0},  // GQA, seqlen_q > seqlen_k: causal rows that see nothing
      {1, 1, 1, 1, 1, 0},      // a single element
      {1, 640, 640, 2, 1, 0},  // several tiles per head: waves, pairs, ordered GQA adds
  };
  std::vector<ProblemCase> cases;
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int64_t d : {64, 128, 256})
      for (bool causal : {false, true})
        for (size_t i = 0; i < std::size(shapes); ++i) {
          ProblemShape s = shapes[i];
          s.head_dim = d;
          cases.push_back({dtype, s, causal, i == 1 || i == 3});
        }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backward, BackwardAccuracy, ::testing::ValuesIn(accuracy_cases()),
                         [](const ::testing::TestParamInfo<ProblemCase>& info) {
                           std::ostringstream out;
                           PrintTo(info.param, &out);
                           std::string name = out.str();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace dash_attn
