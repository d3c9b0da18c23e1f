// The determinism contract of dash_attn::backward, bitwise (0 differing
// elements; the first differing coordinate on failure): reruns, grid caps,
// a concurrent kernel holding most SMs, batch invariance, schedules that share
// a reduction order, and the refusal of wave schedules below a wave.
#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "backward_harness.hpp"
#include "common/compare.hpp"

namespace dash_attn {
namespace {

using testing::BackwardCase;
using testing::BackwardProblem;
using testing::BackwardRunner;
using testing::DeviceBuffer;
using testing::GradientBits;
using testing::count_differences;
using testing::occupy_sms;

constexpr ScheduleKind kDeterministic[] = {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift,
                                           ScheduleKind::kSymmetricShift, ScheduleKind::kAuto};

// Medium shape: several waves of work, GQA (ordered dK/dV adds), partial tiles.
// head_dim 128 (square-ish 64 x 128 tiles) and 256 (the head_dim-split kernel).
BackwardCase medium_case(bool causal, ScheduleKind kind, int64_t head_dim) {
  return BackwardCase{DType::kBF16, ProblemShape{2, 1000, 1000, 4, 2, head_dim}, causal, kind, true, false};
}

// The fp64 reference forward of a medium shape costs seconds: one problem
// per (mask, batch, head_dim), shared by the tests (every schedule reads the same inputs).
const BackwardProblem& medium_problem(bool causal, int64_t batch, int64_t head_dim) {
  static std::map<std::tuple<bool, int64_t, int64_t>, std::unique_ptr<BackwardProblem>> cache;
  auto& slot = cache[{causal, batch, head_dim}];
  if (!slot) {
    BackwardCase c = medium_case(causal, ScheduleKind::kAuto, head_dim);
    c.shape.batch = batch;
    slot = std::make_unique<BackwardProblem>(c, 7);
  }
  return *slot;
}

// The cached problem, run with schedule `kind`.
BackwardProblem medium_problem_for(bool causal, ScheduleKind kind, int64_t head_dim, int64_t batch = 2) {
  BackwardProblem p = medium_problem(causal, batch, head_dim);
  p.c.schedule = kind;
  return p;
}

// Sequence b of `full` as a problem of its own, from the same values.
BackwardProblem sequence_alone(const BackwardProblem& full, int64_t b) {
  const ProblemShape& s = full.c.shape;
  const int64_t q_per = s.seqlen_q * s.heads_q * s.head_dim, k_per = s.seqlen_k * s.heads_kv * s.head_dim;
  auto slice = [b](const std::vector<double>& x, int64_t per_batch) {
    return std::vector<double>(x.begin() + b * per_batch, x.begin() + (b + 1) * per_batch);
  };
  BackwardProblem alone = full;
  alone.c.shape.batch = 1;
  alone.q = slice(full.q, q_per);
  alone.k = slice(full.k, k_per);
  alone.v = slice(full.v, k_per);
  alone.dout = slice(full.dout, q_per);
  alone.forward.out = slice(full.forward.out, q_per);
  alone.forward.lse = slice(full.forward.lse, s.heads_q * s.seqlen_q);
  return alone;
}

// The gradient bits of sequence b of a batch of shape s.
GradientBits sequence_bits(const GradientBits& all, const ProblemShape& s, int64_t b) {
  const int64_t q_per = s.seqlen_q * s.heads_q * s.head_dim, k_per = s.seqlen_k * s.heads_kv * s.head_dim;
  auto slice = [b](const std::vector<uint16_t>& x, int64_t per_batch) {
    return std::vector<uint16_t>(x.begin() + b * per_batch, x.begin() + (b + 1) * per_batch);
  };
  return GradientBits{slice(all.dq, q_per), slice(all.dk, k_per), slice(all.dv, k_per)};
}

void expect_same(const GradientBits& expected, const GradientBits& actual, const ProblemShape& s, const char* what) {
  const std::vector<int64_t> q_dims{s.batch, s.seqlen_q, s.heads_q, s.head_dim};
  const std::vector<int64_t> k_dims{s.batch, s.seqlen_k, s.heads_kv, s.head_dim};
  EXPECT_TRUE(testing::bitwise_equal(expected.dq, actual.dq, q_dims)) << what << ": dQ";
  EXPECT_TRUE(testing::bitwise_equal(expected.dk, actual.dk, k_dims)) << what << ": dK";
  EXPECT_TRUE(testing::bitwise_equal(expected.dv, actual.dv, k_dims)) << what << ": dV";
}

class BackwardDeterminism : public ::testing::TestWithParam<std::tuple<bool, ScheduleKind, int64_t>> {};

// 1000 reruns on one workspace, compared on the device against the first run.
TEST_P(BackwardDeterminism, ThousandRerunsBitwiseEqual) {
  DASH_REQUIRE_SM90();
  const auto [causal, kind, head_dim] = GetParam();
  DASH_REQUIRE_ROWS(DType::kBF16, head_dim);
  const BackwardCase c = medium_case(causal, kind, head_dim);
  BackwardRunner runner(medium_problem_for(causal, kind, head_dim));
  const Options o = runner.options();
  runner.run(o);
  expect_reruns_bitwise_equal(runner, o, 1000, "dQ, dK or dV");
}

// Grid caps: every cap at or above a wave gives the same bits; caps below a
// wave are refused before anything runs.
TEST_P(BackwardDeterminism, GridCapInvariant) {
  DASH_REQUIRE_SM90();
  const auto [causal, kind, head_dim] = GetParam();
  DASH_REQUIRE_ROWS(DType::kBF16, head_dim);
  const BackwardCase c = medium_case(causal, kind, head_dim);
  BackwardRunner runner(medium_problem_for(causal, kind, head_dim));
  runner.run(runner.options());
  const GradientBits reference = runner.bits();
  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int cap : {1, 2, 7, 66, sms}) {
    SCOPED_TRACE("max_ctas " + std::to_string(cap));
    try {
      runner.run(runner.options(cap));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsafeSchedule) << e.what();
      EXPECT_NE(std::string(e.what()).find("co-resident"), std::string::npos) << e.what();
      EXPECT_TRUE(kind == ScheduleKind::kShift || kind == ScheduleKind::kSymmetricShift)
          << "a schedule that runs on any grid was refused: " << e.what();
      continue;
    }
    expect_same(reference, runner.bits(), c.shape, "capped grid");
  }
}

TEST_P(BackwardDeterminism, EqualUnderConcurrentKernel) {
  DASH_REQUIRE_SM90();
  const auto [causal, kind, head_dim] = GetParam();
  DASH_REQUIRE_ROWS(DType::kBF16, head_dim);
  const BackwardCase c = medium_case(causal, kind, head_dim);
  BackwardRunner runner(medium_problem_for(causal, kind, head_dim));
  runner.run(runner.options());
  const GradientBits reference = runner.bits();

  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t busy, work;
  DASH_TEST_CUDA(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  DASH_TEST_CUDA(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking));
  DeviceBuffer<int> release(1);
  DASH_TEST_CUDA(cudaMemset(release.get(), 0, sizeof(int)));
  // One CTA per SM (the shared memory forces it) on all but 60 SMs: room
  // for a wave of the wave schedules (at most 64 CTAs) but not much more.
  const int occupied = std::max(1, sms - 60);
  DASH_TEST_CUDA(cudaFuncSetAttribute(occupy_sms<int>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  occupy_sms<int><<<occupied, 32, 200 * 1024, busy>>>(release.get());
  DASH_TEST_CUDA(cudaGetLastError());
  try {
    runner.run(runner.options(), work);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  const int one = 1;
  DASH_TEST_CUDA(cudaMemcpyAsync(release.get(), &one, sizeof one, cudaMemcpyHostToDevice, work));
  testing::wait_or_die(busy, 30.0, "occupy_sms");
  expect_same(reference, runner.bits(), c.shape, "beside a kernel holding most SMs");
  DASH_TEST_CUDA(cudaStreamDestroy(busy));
  DASH_TEST_CUDA(cudaStreamDestroy(work));
}

// A sequence's gradients do not depend on the other sequences of the batch.
TEST_P(BackwardDeterminism, BatchInvariant) {
  DASH_REQUIRE_SM90();
  const auto [causal, kind, head_dim] = GetParam();
  DASH_REQUIRE_ROWS(DType::kBF16, head_dim);
  const BackwardProblem full = medium_problem_for(causal, kind, head_dim, 3);
  const BackwardCase& batch3 = full.c;
  BackwardRunner full_runner(full);
  full_runner.run(full_runner.options());
  const GradientBits all = full_runner.bits();

  // Sequence 1 alone, from the same values.
  const BackwardProblem alone = sequence_alone(full, 1);
  BackwardRunner alone_runner(alone);
  alone_runner.run(alone_runner.options());
  expect_same(sequence_bits(all, batch3.shape, 1), alone_runner.bits(), alone.c.shape, "sequence 1 of 3 vs alone");
}

// Chains that walk the whole GQA group (dK/dV stored from registers) or
// half of it (ordered dK/dV adds): reruns, grid caps and the batch
// composition leave the bits alone.
TEST_P(BackwardDeterminism, GroupWalkRerunsCapsAndBatchInvariant) {
  DASH_REQUIRE_SM90();
  const auto [causal, kind, head_dim] = GetParam();
  DASH_REQUIRE_ROWS(DType::kBF16, head_dim);
  if (kind == ScheduleKind::kShift || kind == ScheduleKind::kSymmetricShift) GTEST_SKIP() << "waves: time";
  const BackwardCase c = medium_case(causal, kind, head_dim);
  const int group = static_cast<int>(c.shape.heads_q / c.shape.heads_kv);
  const BackwardProblem pair = medium_problem_for(causal, kind, head_dim);
  BackwardRunner runner(pair);
  const BackwardProblem alone = sequence_alone(pair, 0);
  BackwardRunner single(alone);
  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int walk : {group, group / 2}) {
    SCOPED_TRACE("q_heads_per_chain " + std::to_string(walk));
    Options o = runner.options();
    o.q_heads_per_chain = walk;
    runner.run(o);
    const GradientBits reference = runner.bits();
    expect_reruns_bitwise_equal(runner, o, 100, "dQ, dK or dV");
    for (int cap : {1, 7, sms}) {
      Options capped = o;
      capped.max_ctas = cap;
      runner.run(capped);
      expect_same(reference, runner.bits(), c.shape, "capped grid");
    }
    single.run(o);
    expect_same(sequence_bits(reference, c.shape, 0), single.bits(), alone.c.shape, "sequence 0 of 2 vs alone");
  }
}

INSTANTIATE_TEST_SUITE_P(Backward, BackwardDeterminism,
                         ::testing::Combine(::testing::Bool(), ::testing::ValuesIn(kDeterministic),
                                            ::testing::Values(int64_t{128}, int64_t{256})),
                         [](const ::testing::TestParamInfo<std::tuple<bool, ScheduleKind, int64_t>>& info) {
                           return std::string(std::get<0>(info.param) ? "causal_" : "full_") +
                                  std::string(to_string(std::get<1>(info.param))) + "_d" +
                                  std::to_string(std::get<2>(info.param));
                         });

// fa3 and descending add every dQ tile in ascending KV order on a full mask:
// their dQ bits agree (dK, dV sum the Q tiles in different orders and may not).
TEST(BackwardDeterminismAcrossSchedules, SharedReductionOrderGivesSameDq) {
  DASH_REQUIRE_SM90();
  DASH_REQUIRE_ROWS(DType::kBF16, 128);
  const BackwardCase c = medium_case(false, ScheduleKind::kFA3, 128);
  BackwardRunner runner(medium_problem_for(false, ScheduleKind::kFA3, 128));
  runner.run(runner.options());
  const GradientBits fa3 = runner.bits();
  Options o = runner.options();
  o.schedule = ScheduleKind::kDescending;
  runner.run(o);
  EXPECT_TRUE(testing::bitwise_equal(fa3.dq, runner.bits().dq,
                                     {c.shape.batch, c.shape.seqlen_q, c.shape.heads_q, c.shape.head_dim}));
}

}  // namespace
}  // namespace dash_attn
