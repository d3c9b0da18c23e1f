// Backward timing on rows of the standard grid (BENCHMARKS.md: total tokens
// 16384, hidden 2048), every schedule, printed as a table. A measurement, not
// a check: it runs only with DASH_BWD_PERF=1 and never fails on speed.
// Inputs are random (O, dO, LSE need not come from a forward for timing).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backward_harness.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

double median_ms(std::vector<float> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

TEST(BackwardPerf, StandardGridRows) {
  DASH_REQUIRE_SM90();
  if (std::getenv("DASH_BWD_PERF") == nullptr) GTEST_SKIP() << "set DASH_BWD_PERF=1 to time the backward";
  constexpr int64_t kTokens = 16384, kHidden = 2048;
  constexpr int kWarmup = 3, kReps = 15;
  std::printf("%-5s %-7s %6s %-16s %9s %8s\n", "hdim", "mask", "seqlen", "schedule", "ms", "TFLOPS");
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (int64_t seqlen : {1024, 4096, 16384}) {
        const ProblemShape s{kTokens / seqlen, seqlen, seqlen, kHidden / d, kHidden / d, d};
        const size_t n = s.batch * seqlen * s.heads_q * d;
        // A block of random values repeated with a different offset per tensor:
        // drawing 5 x 32M normals on the host would cost more than the timing.
        std::mt19937_64 rng(seqlen + d);
        std::normal_distribution<float> normal;
        std::vector<__nv_bfloat16> block(1 << 20);
        for (auto& x : block) x = __nv_bfloat16(normal(rng));
        std::vector<__nv_bfloat16> host(n);
        DeviceBuffer<__nv_bfloat16> q(n), k(n), v(n), o(n), dout(n), dq(n), dk(n), dv(n);
        size_t offset = 0;
        for (auto* b : {&q, &k, &v, &o, &dout}) {
          offset += 7919;
          for (size_t i = 0; i < n; ++i) host[i] = block[(i + offset) % block.size()];
          b->upload(host);
        }
        std::vector<float> lse_host(s.batch * s.heads_q * seqlen, std::log(static_cast<float>(seqlen)));
        DeviceBuffer<float> lse(lse_host.size());
        lse.upload(lse_host);
        for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                  ScheduleKind::kShift, ScheduleKind::kAuto}) {
          Options opt;
          opt.causal = causal;
          opt.deterministic = kind != ScheduleKind::kAtomic;
          opt.schedule = kind;
          BackwardArgs a;
          a.shape = s;
          a.q = testing::dense_view(q.get(), seqlen, s.heads_q, d);
          a.k = testing::dense_view(k.get(), seqlen, s.heads_kv, d);
          a.v = testing::dense_view(v.get(), seqlen, s.heads_kv, d);
          a.out = testing::dense_view(o.get(), seqlen, s.heads_q, d);
          a.dout = testing::dense_view(dout.get(), seqlen, s.heads_q, d);
          a.dq = testing::dense_view(dq.get(), seqlen, s.heads_q, d);
          a.dk = testing::dense_view(dk.get(), seqlen, s.heads_kv, d);
          a.dv = testing::dense_view(dv.get(), seqlen, s.heads_kv, d);
          a.lse = LseView{lse.get(), s.heads_q * seqlen, seqlen};
          DeviceBuffer<char> workspace(backward_workspace_size(s, opt));
          a.workspace = workspace.get();
          a.workspace_bytes = workspace.bytes();
          cudaEvent_t start, stop;
          DASH_TEST_CUDA(cudaEventCreate(&start));
          DASH_TEST_CUDA(cudaEventCreate(&stop));
          std::vector<float> times;
          for (int r = 0; r < kWarmup + kReps; ++r) {
            const testing::Watchdog watchdog(30.0, "timed backward");
            DASH_TEST_CUDA(cudaEventRecord(start));
            backward(a, opt, nullptr);
            DASH_TEST_CUDA(cudaEventRecord(stop));
            DASH_TEST_CUDA(cudaEventSynchronize(stop));
            float ms = 0;
            DASH_TEST_CUDA(cudaEventElapsedTime(&ms, start, stop));
            if (r >= kWarmup) times.push_back(ms);
          }
          const double ms = median_ms(times);
          const double flops = 2.5 * 4.0 * s.batch * s.heads_q * seqlen * seqlen * d * (causal ? 0.5 : 1.0);
          std::printf("%-5lld %-7s %6lld %-16s %9.3f %8.1f\n", static_cast<long long>(d), causal ? "causal" : "full",
                      static_cast<long long>(seqlen), std::string(to_string(kind)).c_str(), ms, flops / (ms * 1e9));
          std::fflush(stdout);
          DASH_TEST_CUDA(cudaEventDestroy(start));
          DASH_TEST_CUDA(cudaEventDestroy(stop));
        }
      }
}

}  // namespace
}  // namespace dash_attn
