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

// A problem with its fp64 gradients and those of a naive same-precision backward.
struct CheckedProblem {
  explicit CheckedProblem(const ProblemCase& pc)
      : pc(pc),
        problem(BackwardCase{pc.dtype, pc.shape, pc.causal, ScheduleKind::kAuto, true, pc.strided},
                0x5eed + pc.shape.seqlen_q * 31 + pc.shape.head_dim),
        exact(reference::attention_backward(pc.shape, pc.causal, problem.scale, problem.q, problem.k, problem.v,
                                            problem.dout)),
        naive(reference::naive_backward(pc.dtype, pc.shape, pc.causal, problem.scale, problem.q, problem.k, problem.v,
                                        problem.dout)) {}

  void expect_accurate(const testing::GradientBits& bits) const {
    // A quarter of the dtype's epsilon, relative to the gradient's magnitude.
    const double quarter_eps = pc.dtype == DType::kBF16 ? 1e-3 : 1.25e-4;
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

  std::string case_name(ScheduleKind kind) const {
    return testing::case_name(BackwardCase{pc.dtype, pc.shape, pc.causal, kind, kind != ScheduleKind::kAtomic, pc.strided});
  }

  Options options(ScheduleKind kind, int max_ctas = 0) const {
    Options o;
    o.causal = pc.causal;
    o.deterministic = kind != ScheduleKind::kAtomic;
    o.schedule = kind;
    o.max_ctas = max_ctas;
    return o;
  }

  ProblemCase pc;
  testing::BackwardProblem problem;
  reference::Gradients exact, naive;
};

std::string test_name(const ::testing::TestParamInfo<ProblemCase>& info) {
  std::ostringstream out;
  PrintTo(info.param, &out);
  std::string name = out.str();
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class BackwardAccuracy : public ::testing::TestWithParam<ProblemCase> {};

TEST_P(BackwardAccuracy, EverySchedule) {
  DASH_REQUIRE_SM90();
  const CheckedProblem checked(GetParam());
  testing::BackwardRunner runner(checked.problem);
  for (const ScheduleKind kind : kSchedules) {
    SCOPED_TRACE(checked.case_name(kind));
    runner.run(checked.options(kind));
    checked.expect_accurate(runner.bits());
  }
}

// GQA/MQA chains that walk 2 .. group q-heads (Schedule::chain_heads): dK/dV
// stored from registers (the whole group) or added per chain (part of it).
TEST_P(BackwardAccuracy, EveryGroupWalk) {
  DASH_REQUIRE_SM90();
  const ProblemShape& s = GetParam().shape;
  const int group = static_cast<int>(s.heads_q / s.heads_kv);
  if (group == 1) GTEST_SKIP() << "MHA: one q-head per chain";
  const CheckedProblem checked(GetParam());
  testing::BackwardRunner runner(checked.problem);
  for (const ScheduleKind kind : kSchedules)
    for (int walk = 2; walk <= group; ++walk) {
      if (group % walk != 0) continue;
      SCOPED_TRACE(checked.case_name(kind) + " q_heads_per_chain " + std::to_string(walk));
      Options o = checked.options(kind);
      o.q_heads_per_chain = walk;
      runner.run(o);
      checked.expect_accurate(runner.bits());
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
  for (const testing::KernelRow& row : testing::compiled_rows(Pass::kBackward))
    for (bool causal : {false, true})
      for (size_t i = 0; i < std::size(shapes); ++i) {
        ProblemShape s = shapes[i];
        s.head_dim = row.head_dim;
        cases.push_back({row.dtype, s, causal, i == 1 || i == 3});
      }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backward, BackwardAccuracy, ::testing::ValuesIn(accuracy_cases()),
                         test_name);

// Two CTAs for a multi-head MHA problem: each CTA runs many chains back to
// back, so the producer works a chain ahead (the next chain's first Q/dO tile
// and K/V load while dK/dV of the current one are written back, and at hdim
// 64/128 a TMA store of dK/dV runs into the next chain).
// Every schedule that runs on any grid, against fp64; the deterministic ones
// also bitwise equal to their full grid.
class BackwardChainsBackToBack : public ::testing::TestWithParam<ProblemCase> {};

TEST_P(BackwardChainsBackToBack, TwoCtasMatchFullGrid) {
  DASH_REQUIRE_SM90();
  const CheckedProblem checked(GetParam());
  testing::BackwardRunner runner(checked.problem);
  for (const ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                  ScheduleKind::kAuto}) {
    SCOPED_TRACE(checked.case_name(kind));
    runner.run(checked.options(kind));
    const testing::GradientBits full_grid = runner.bits();
    runner.run(checked.options(kind, 2));
    const testing::GradientBits two_ctas = runner.bits();
    checked.expect_accurate(two_ctas);
    if (kind != ScheduleKind::kAtomic) {
      EXPECT_TRUE(two_ctas.dq == full_grid.dq) << "dQ bits differ between 2 CTAs and the full grid";
      EXPECT_TRUE(two_ctas.dk == full_grid.dk) << "dK bits differ between 2 CTAs and the full grid";
      EXPECT_TRUE(two_ctas.dv == full_grid.dv) << "dV bits differ between 2 CTAs and the full grid";
    }
  }
}

std::vector<ProblemCase> back_to_back_cases() {
  std::vector<ProblemCase> cases;
  for (int64_t d : testing::compiled_head_dims(Pass::kBackward, DType::kBF16))
    for (bool causal : {false, true}) cases.push_back({DType::kBF16, ProblemShape{2, 333, 333, 3, 3, d}, causal, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backward, BackwardChainsBackToBack, ::testing::ValuesIn(back_to_back_cases()),
                         test_name);
// A build without bf16 backward rows has no cases.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardChainsBackToBack);

}  // namespace
}  // namespace dash_attn
