// Forward TFLOPS on the standard grid (16k tokens, hidden 2048, bf16):
// printed, never asserted. Median of 30 timed launches after 3 warm-ups,
// CUDA events around each launch. FLOPs = 4 b h sq sk d, halved for causal.
#include <algorithm>
#include <cstdio>

#include "dash_attn/api.hpp"
#include "gpu_support.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

double median_ms(const ForwardArgs& a, const Options& options) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) forward(a, options, nullptr);
  std::vector<float> times;
  for (int i = 0; i < 30; ++i) {
    cudaEventRecord(start);
    forward(a, options, nullptr);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

TEST(ForwardPerf, PrintsTflopsOnStandardGrid) {
  DASH_REQUIRE_SM90();
  constexpr int64_t kTokens = 16384, kHidden = 2048;
  // Every row of the grid holds the same number of elements: one set of buffers.
  constexpr size_t kCount = kTokens * kHidden;
  std::mt19937_64 rng(2026);
  std::vector<__nv_bfloat16> host;
  std::vector<double> unused;
  DeviceBuffer<__nv_bfloat16> q(kCount), k(kCount), v(kCount), out(kCount);
  DeviceBuffer<float> lse(kTokens * kHidden / 64);
  for (const DeviceBuffer<__nv_bfloat16>* buffer : {&q, &k, &v}) {
    testing::random_tensor(rng, kCount, host, unused);
    buffer->upload(host);
  }
  std::printf("forward bf16 TFLOPS (16k tokens, hidden 2048)\n%-6s %-7s %8s %8s %8s %8s %8s %8s\n", "hdim", "mask",
              "512", "1k", "2k", "4k", "8k", "16k");
  for (int64_t d : {64, 128, 256})
    for (bool causal : {false, true}) {
      std::printf("%-6lld %-7s", static_cast<long long>(d), causal ? "causal" : "full");
      for (int64_t seqlen : {512, 1024, 2048, 4096, 8192, 16384}) {
        const ProblemShape s{kTokens / seqlen, seqlen, seqlen, kHidden / d, kHidden / d, d};
        ForwardArgs a;
        a.shape = s;
        a.q = testing::dense_view(q.get(), seqlen, s.heads_q, d);
        a.k = testing::dense_view(k.get(), seqlen, s.heads_kv, d);
        a.v = testing::dense_view(v.get(), seqlen, s.heads_kv, d);
        a.out = testing::dense_view(out.get(), seqlen, s.heads_q, d);
        a.lse = LseView{lse.get(), s.heads_q * seqlen, seqlen};
        Options options;
        options.causal = causal;
        const double ms = median_ms(a, options);
        const double flops = 4.0 * s.batch * s.heads_q * seqlen * seqlen * d * (causal ? 0.5 : 1.0);
        std::printf(" %8.1f", flops / (ms * 1e-3) / 1e12);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace dash_attn
