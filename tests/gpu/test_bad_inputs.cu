// Inputs that are valid but hostile: NaN/Inf values (they must stay in their
// rows and never stall a deterministic schedule) and tensors of more than 2^31
// elements (no 32-bit offset may wrap).
#include <cmath>
#include <limits>

#include "backward_harness.hpp"

namespace dash_attn {
namespace {

using testing::BackwardCase;
using testing::BackwardProblem;
using testing::BackwardRunner;
using testing::DeviceBuffer;

bool is_nan_bf16(uint16_t bits) { return (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0; }

// Dense (batch, seq, head, dim) index of query row `row` of (batch 0, head 0).
int64_t row_start(const ProblemShape& s, int64_t row) { return row * s.heads_q * s.head_dim; }

class NonFiniteInputs : public ::testing::TestWithParam<ScheduleKind> {};

TEST_P(NonFiniteInputs, NanInOneQueryRowStaysInThatRow) {
  DASH_REQUIRE_SM90();
  DASH_REQUIRE_ROWS(DType::kBF16, 128);
  const BackwardCase c{DType::kBF16, ProblemShape{2, 300, 300, 4, 2, 128}, true, GetParam(), true, false};
  const ProblemShape& s = c.shape;
  const int64_t row = 137;
  BackwardProblem clean(c, 21);
  BackwardProblem poisoned = clean;
  poisoned.q[row_start(s, row) + 5] = std::numeric_limits<double>::quiet_NaN();
  BackwardRunner clean_runner(clean), nan_runner(poisoned);
  DeviceBuffer<uint16_t> out_clean(clean_runner.q_elements()), out_nan(nan_runner.q_elements());
  DeviceBuffer<float> lse_clean(reference::lse_elements(s)), lse_nan(reference::lse_elements(s));
  forward(clean_runner.forward_args(out_clean, lse_clean), clean_runner.options(), nullptr);
  forward(nan_runner.forward_args(out_nan, lse_nan), nan_runner.options(), nullptr);
  DASH_TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<uint16_t> a = out_clean.download(), b = out_nan.download();
  const int64_t row_elems = s.head_dim, first = row_start(s, row);
  for (int64_t i = 0; i < static_cast<int64_t>(a.size()); ++i) {
    if (i >= first && i < first + row_elems) {
      EXPECT_TRUE(is_nan_bf16(b[i])) << "element " << i - first << " of the NaN row is not NaN";
    } else if (a[i] != b[i]) {
      ADD_FAILURE() << "the NaN reached element " << i << " outside its row";
      break;
    }
  }
  // The backward finishes under the watchdog; dQ of every other row is untouched.
  clean_runner.run(clean_runner.options());
  nan_runner.run(nan_runner.options());
  const testing::GradientBits ga = clean_runner.bits(), gb = nan_runner.bits();
  for (int64_t i = 0; i < static_cast<int64_t>(ga.dq.size()); ++i) {
    const bool in_row = i >= first && i < first + row_elems;
    if (!in_row && ga.dq[i] != gb.dq[i]) {
      ADD_FAILURE() << "dq element " << i << " outside the NaN row changed";
      break;
    }
  }
}

TEST_P(NonFiniteInputs, InfiniteKeysFinishWithoutHanging) {
  DASH_REQUIRE_SM90();
  DASH_REQUIRE_ROWS(DType::kBF16, 64);
  const BackwardCase c{DType::kBF16, ProblemShape{1, 500, 500, 4, 4, 64}, false, GetParam(), true, false};
  BackwardProblem problem(c, 5);
  for (int64_t i = 0; i < 64; ++i) problem.k[(i * 7 % 500) * 4 * 64 + i] = std::numeric_limits<double>::infinity();
  BackwardRunner runner(problem);
  DeviceBuffer<uint16_t> out(runner.q_elements());
  DeviceBuffer<float> lse(reference::lse_elements(c.shape));
  forward(runner.forward_args(out, lse), runner.options(), nullptr);
  testing::wait_or_die(nullptr, 30.0, "forward with infinite keys");
  runner.run(runner.options());  // throws on a CUDA error; the watchdog fails a hang
}

INSTANTIATE_TEST_SUITE_P(Schedules, NonFiniteInputs,
                         ::testing::Values(ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift,
                                           ScheduleKind::kSymmetricShift),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// K and V rows: all equal to (k0, v0) except the last kSpecial, which sit past
// element 2^31 of a (1, 2^24 + kSpecial, 1, 128) tensor. Values from a hash so
// the device fills 8 GiB without a host copy; the reference is closed-form.
constexpr int64_t kSpecial = 64;
constexpr int64_t kDim = 128;

// which: 0 = K, 1 = Q, 2 = V; uniform in (-0.5, 0.5).
__host__ __device__ float pattern(int64_t row, int64_t col, int which) {
  uint32_t h = static_cast<uint32_t>(row * 131 + col * 7 + which * 1000003) * 2654435761u;
  h ^= h >> 15;
  return static_cast<float>(h & 0xFFFF) / 65535.0f - 0.5f;
}

// Row r of K or V: row 0's values unless r >= first_special. The special keys
// are 40x longer, so that some rows' scores beat 2^24 identical keys
// (a gap above ln 2^24 = 16.6).
__host__ __device__ float kv_value(int64_t r, int64_t col, int which, int64_t first_special) {
  if (r < first_special) return pattern(0, col, which);
  return pattern(r, col, which) * (which == 0 ? 40.0f : 1.0f);
}

__global__ void fill_kv(__nv_bfloat16* t, int64_t rows, int64_t first_special, int which) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * kDim; i += int64_t(gridDim.x) * blockDim.x)
    t[i] = __float2bfloat16(kv_value(i / kDim, i % kDim, which, first_special));
}

double bf16_round(float x) { return static_cast<double>(static_cast<float>(__float2bfloat16(x))); }

TEST(HugeTensors, KeysPastTwoToTheThirtyFirstElementsAreRead) {
  DASH_REQUIRE_SM90();
  if (!testing::is_compiled(Pass::kForward, DType::kBF16, kDim)) GTEST_SKIP() << "bf16 forward row not compiled";
  const int64_t seqlen_k = (int64_t{1} << 24) + kSpecial, seqlen_q = 64, first_special = int64_t{1} << 24;
  ASSERT_GT(seqlen_k * kDim, int64_t{1} << 31);
  size_t free_bytes = 0, total = 0;
  DASH_TEST_CUDA(cudaMemGetInfo(&free_bytes, &total));
  if (free_bytes < (size_t{20} << 30)) GTEST_SKIP() << "needs 20 GiB of free device memory";
  DeviceBuffer<__nv_bfloat16> k(seqlen_k * kDim), v(seqlen_k * kDim), q(seqlen_q * kDim), out(seqlen_q * kDim);
  DeviceBuffer<float> lse(seqlen_q);
  fill_kv<<<1024, 256>>>(k.get(), seqlen_k, first_special, 0);
  fill_kv<<<1024, 256>>>(v.get(), seqlen_k, first_special, 2);
  std::vector<__nv_bfloat16> q_host(seqlen_q * kDim);
  for (int64_t i = 0; i < seqlen_q * kDim; ++i) q_host[i] = __float2bfloat16(pattern(i / kDim, i % kDim, 1));
  q.upload(q_host);
  out.poison();
  ForwardArgs a;
  a.shape = ProblemShape{1, seqlen_q, seqlen_k, 1, 1, kDim};
  a.q = TensorView{q.get(), seqlen_q * kDim, kDim, kDim, 1};
  a.k = TensorView{k.get(), seqlen_k * kDim, kDim, kDim, 1};
  a.v = TensorView{v.get(), seqlen_k * kDim, kDim, kDim, 1};
  a.out = TensorView{out.get(), seqlen_q * kDim, kDim, kDim, 1};
  a.lse = LseView{lse.get(), seqlen_q, seqlen_q};
  Options options;
  forward(a, options, nullptr);
  testing::wait_or_die(nullptr, 60.0, "forward over 2^24 keys");
  DASH_TEST_CUDA(cudaGetLastError());
  const std::vector<__nv_bfloat16> got = out.download();
  // Closed form: first_special identical keys of score s0, then kSpecial keys.
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  double worst = 0.0;
  int special_dominated = 0;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    auto key = [&](int64_t r, int64_t col) { return bf16_round(kv_value(r, col, 0, first_special)); };
    auto value = [&](int64_t r, int64_t col) { return bf16_round(kv_value(r, col, 2, first_special)); };
    auto score = [&](int64_t r) {
      double dot = 0;
      for (int64_t c = 0; c < kDim; ++c) dot += bf16_round(pattern(i, c, 1)) * key(r, c);
      return dot * scale;
    };
    std::vector<double> s(kSpecial + 1);
    s[0] = score(0);
    double top = s[0];
    for (int64_t t = 0; t < kSpecial; ++t) top = std::max(top, s[t + 1] = score(first_special + t));
    std::vector<double> w(kSpecial + 1);
    double sum = w[0] = static_cast<double>(first_special) * std::exp(s[0] - top);
    for (int64_t t = 1; t <= kSpecial; ++t) sum += w[t] = std::exp(s[t] - top);
    special_dominated += w[0] < 0.5 * sum;
    for (int64_t col = 0; col < kDim; ++col) {
      double o = w[0] * value(0, col);
      for (int64_t t = 1; t <= kSpecial; ++t) o += w[t] * value(first_special + t - 1, col);
      o /= sum;
      worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[i * kDim + col])) - o));
    }
  }
  EXPECT_LT(worst, 2e-2) << "rows past element 2^31 were not read as written";
  EXPECT_GT(special_dominated, 0) << "the test's keys past 2^31 never dominate a row: it checks nothing";
}

}  // namespace
}  // namespace dash_attn
