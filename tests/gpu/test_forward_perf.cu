// Forward TFLOPS, printed and never asserted. Median of 30 timed launches
// after 3 warm-ups, CUDA events around each launch; FLOPs = 4 b h sq sk d,
// halved for causal. bf16, random inputs.
#include <algorithm>
#include <cstdio>

#include "dash_attn/api.hpp"
#include "gpu_support.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

// Dense bf16 tensors of `count` elements each, filled once.
struct PerfBuffers {
  explicit PerfBuffers(size_t count) : q(count), k(count), v(count), out(count), lse(count / 64) {
    std::mt19937_64 rng(2026);
    std::vector<__nv_bfloat16> host;
    std::vector<double> unused;
    for (const DeviceBuffer<__nv_bfloat16>* buffer : {&q, &k, &v}) {
      testing::random_tensor(rng, count, host, unused);
      buffer->upload(host);
    }
  }
  DeviceBuffer<__nv_bfloat16> q, k, v, out;
  DeviceBuffer<float> lse;
};

double forward_tflops(PerfBuffers& b, const ProblemShape& s, bool causal) {
  ForwardArgs a;
  a.shape = s;
  a.q = testing::dense_view(b.q.get(), s.seqlen_q, s.heads_q, s.head_dim);
  a.k = testing::dense_view(b.k.get(), s.seqlen_k, s.heads_kv, s.head_dim);
  a.v = testing::dense_view(b.v.get(), s.seqlen_k, s.heads_kv, s.head_dim);
  a.out = testing::dense_view(b.out.get(), s.seqlen_q, s.heads_q, s.head_dim);
  a.lse = LseView{b.lse.get(), s.heads_q * s.seqlen_q, s.seqlen_q};
  Options options;
  options.causal = causal;
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
  const double flops = 4.0 * s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim * (causal ? 0.5 : 1.0);
  return flops / (times[times.size() / 2] * 1e-3) / 1e12;
}

// The quick check: bf16, hdim 128, seqlen 4k, batch 4, 16 heads.
TEST(ForwardPerf, Hdim128Seqlen4k) {
  DASH_REQUIRE_SM90();
  if (!testing::is_compiled(Pass::kForward, DType::kBF16, 128)) GTEST_SKIP() << "bf16 hdim 128 forward not compiled";
  const ProblemShape s{4, 4096, 4096, 16, 16, 128};
  PerfBuffers buffers(s.batch * s.seqlen_q * s.heads_q * s.head_dim);
  for (bool causal : {false, true})
    std::printf("forward bf16 hdim128 b4 h16 s4096 %-6s: %6.1f TFLOPS\n", causal ? "causal" : "full",
                forward_tflops(buffers, s, causal));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The standard grid of BENCHMARKS.md: 16k tokens, hidden 2048.
TEST(ForwardPerf, StandardGrid) {
  DASH_REQUIRE_SM90();
  constexpr int64_t kTokens = 16384, kHidden = 2048;
  PerfBuffers buffers(kTokens * kHidden);  // every row of the grid has this many elements
  std::printf("forward bf16 TFLOPS (16k tokens, hidden 2048)\n%-6s %-7s %8s %8s %8s %8s %8s %8s\n", "hdim", "mask",
              "512", "1k", "2k", "4k", "8k", "16k");
  for (int64_t d : testing::compiled_head_dims(Pass::kForward, DType::kBF16))
    for (bool causal : {false, true}) {
      std::printf("%-6lld %-7s", static_cast<long long>(d), causal ? "causal" : "full");
      for (int64_t seqlen : {512, 1024, 2048, 4096, 8192, 16384})
        std::printf(" %8.1f", forward_tflops(buffers, ProblemShape{kTokens / seqlen, seqlen, seqlen, kHidden / d, kHidden / d, d}, causal));
      std::printf("\n");
      std::fflush(stdout);
    }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace dash_attn
