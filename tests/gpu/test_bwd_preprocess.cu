// The backward preprocess kernel against a CPU computation of -D and -LSE in
// the main kernel's units (-lse * log2(e) / bwd::lse_divisor).
#include <cmath>

#include "common/compare.hpp"
#include "gpu_support.hpp"
#include "kernels/sm90/bwd/bwd_row_stats.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

// Ordered schedules: the counters are cleared and the dQ accumulator left as
// it was (the rank-0 add stores); the atomic schedule's accumulator is zeroed.
void check_preprocess(ScheduleKind schedule) {
  const ProblemShape s{3, 77, 77, 4, 2, 128};
  Options options{};
  options.schedule = schedule;
  const plan::BackwardWorkspace w = host::plan_backward_workspace(s, options);
  std::mt19937_64 rng(1234);
  const size_t q_count = s.batch * s.seqlen_q * s.heads_q * s.head_dim;
  std::vector<__nv_bfloat16> out_h, dout_h;
  std::vector<double> out_x, dout_x;
  testing::random_tensor(rng, q_count, out_h, out_x);
  testing::random_tensor(rng, q_count, dout_h, dout_x);
  std::vector<float> lse_h(s.batch * s.heads_q * s.seqlen_q);
  std::normal_distribution<float> normal;
  for (float& x : lse_h) x = normal(rng);
  lse_h[5] = -INFINITY;  // a fully masked row

  DeviceBuffer<__nv_bfloat16> out(q_count), dout(q_count);
  DeviceBuffer<float> lse(lse_h.size());
  DeviceBuffer<char> workspace(w.total_bytes);
  out.upload(out_h);
  dout.upload(dout_h);
  lse.upload(lse_h);
  workspace.poison();

  BackwardArgs a{};
  a.shape = s;
  a.out = testing::dense_view(out.get(), s.seqlen_q, s.heads_q, s.head_dim);
  a.dout = testing::dense_view(dout.get(), s.seqlen_q, s.heads_q, s.head_dim);
  a.lse = LseView{lse.get(), s.heads_q * s.seqlen_q, s.seqlen_q};
  a.workspace = workspace.get();
  a.workspace_bytes = w.total_bytes;
  const float softmax_scale = 0.3f;
  sm90::launch_backward_preprocess(a, w, host::backward_tile_problem(s, options), softmax_scale, 0.f, nullptr);
  DASH_TEST_CUDA(cudaDeviceSynchronize());

  const std::vector<char> bytes = workspace.download();
  const auto* minus_d = reinterpret_cast<const float*>(bytes.data() + w.minus_d.offset);
  const auto* minus_lse = reinterpret_cast<const float*>(bytes.data() + w.minus_lse.offset);
  // hdim 128 starts S^T's accumulator at -LSE: in the units of q.k.
  const float divisor = sm90::bwd::lse_divisor(static_cast<int>(s.head_dim), softmax_scale, 0.f);
  ASSERT_EQ(divisor, sm90::bwd::exponent_scale(softmax_scale, 0.f));
  const auto* dq_accum = reinterpret_cast<const float*>(bytes.data() + w.dq_accum.offset);
  const auto* counters = reinterpret_cast<const int32_t*>(bytes.data() + w.dq_counters.offset);
  const int64_t padded = static_cast<int64_t>(w.q_tiles) * w.tile.block_m;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t r = 0; r < padded; ++r) {
        const int64_t slot = (b * s.heads_q + h) * padded + r;
        if (r >= s.seqlen_q) {
          EXPECT_EQ(minus_d[slot], 0.0f);
          EXPECT_EQ(minus_lse[slot], -INFINITY);
          continue;
        }
        double d = 0.0;
        for (int64_t k = 0; k < s.head_dim; ++k) {
          const int64_t i = ((b * s.seqlen_q + r) * s.heads_q + h) * s.head_dim + k;
          d += out_x[i] * dout_x[i];
        }
        ASSERT_NEAR(minus_d[slot], -d, 1e-4 * (1.0 + std::abs(d))) << "D at " << b << "," << h << "," << r;
        const float lse_in = lse_h[(b * s.heads_q + h) * s.seqlen_q + r];
        const float expected = lse_in == -INFINITY ? -INFINITY : -(lse_in * static_cast<float>(M_LOG2E)) / divisor;
        ASSERT_FLOAT_EQ(minus_lse[slot], expected) << "LSE at " << b << "," << h << "," << r;
      }
  const bool ordered = w.dq_counters.bytes != 0;
  ASSERT_EQ(ordered, schedule != ScheduleKind::kAtomic);
  const auto* accum_bits = reinterpret_cast<const uint32_t*>(dq_accum);
  for (size_t i = 0; i < w.dq_accum.bytes / sizeof(float); ++i) {
    if (ordered)
      ASSERT_EQ(accum_bits[i], 0xFFFFFFFFu) << "dq_accum " << i << " was written";
    else
      ASSERT_EQ(dq_accum[i], 0.0f) << "dq_accum " << i;
  }
  for (size_t i = 0; i < w.dq_counters.bytes / sizeof(int32_t); ++i) ASSERT_EQ(counters[i], 0) << "counter " << i;
}

TEST(BackwardPreprocess, MatchesHostComputationAndClearsAccumulators) {
  DASH_REQUIRE_SM90();
  check_preprocess(ScheduleKind::kDescending);
  check_preprocess(ScheduleKind::kAtomic);
}

}  // namespace
}  // namespace dash_attn
