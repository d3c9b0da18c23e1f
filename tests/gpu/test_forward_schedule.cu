// The forward kernel's dynamic tile claims: which CTA takes a tile must never
// change the result. A causal problem (unequal tile lengths, so claims race)
// is run once on the default stream; then many times on two streams at once
// (each stream has its own claim counter), and from a CUDA graph replayed
// several times (captured on a stream that has a counter, and on one first
// seen during capture, which takes the static order). Every output must be
// bitwise equal to the first, so every tile was computed exactly once each call
// and each call found its counter at zero.
#include <cstring>

#include "common/compare.hpp"
#include "dash_attn/api.hpp"
#include "gpu_support.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

struct ScheduleProblem {
  // 4 x 8 heads x 8 query tiles = 256 tiles of 1 to 8 key tiles: about two per SM.
  ProblemShape shape{4, 1000, 1000, 8, 4, 128};
  size_t q_elements = shape.batch * shape.seqlen_q * shape.heads_q * shape.head_dim;
  size_t kv_elements = shape.batch * shape.seqlen_k * shape.heads_kv * shape.head_dim;
  DeviceBuffer<__nv_bfloat16> q{q_elements}, k{kv_elements}, v{kv_elements};

  ScheduleProblem() {
    std::mt19937_64 rng(7);
    std::vector<__nv_bfloat16> host;
    std::vector<double> unused;
    testing::random_tensor(rng, q_elements, host, unused);
    q.upload(host);
    testing::random_tensor(rng, kv_elements, host, unused);
    k.upload(host);
    testing::random_tensor(rng, kv_elements, host, unused);
    v.upload(host);
  }

  ForwardArgs args(DeviceBuffer<__nv_bfloat16>& out) const {
    const ProblemShape& s = shape;
    ForwardArgs a;
    a.shape = s;
    a.q = testing::dense_view(q.get(), s.seqlen_q, s.heads_q, s.head_dim);
    a.k = testing::dense_view(k.get(), s.seqlen_k, s.heads_kv, s.head_dim);
    a.v = testing::dense_view(v.get(), s.seqlen_k, s.heads_kv, s.head_dim);
    a.out = testing::dense_view(out.get(), s.seqlen_q, s.heads_q, s.head_dim);
    a.lse = LseView{lse.get(), s.heads_q * s.seqlen_q, s.seqlen_q};
    return a;
  }
  DeviceBuffer<float> lse{static_cast<size_t>(shape.batch * shape.heads_q * shape.seqlen_q)};
};

std::vector<uint16_t> bits(const DeviceBuffer<__nv_bfloat16>& out) {
  const std::vector<__nv_bfloat16> values = out.download();
  std::vector<uint16_t> b(values.size());
  std::memcpy(b.data(), values.data(), b.size() * sizeof(uint16_t));
  return b;
}

TEST(ForwardSchedule, ConcurrentStreamsAndGraphReplaysMatchOneRun) {
  DASH_REQUIRE_SM90();
  ScheduleProblem p;
  if (!testing::is_compiled(Pass::kForward, DType::kBF16, p.shape.head_dim))
    GTEST_SKIP() << "bf16 forward row not compiled";
  const std::vector<int64_t> dims{p.shape.batch, p.shape.seqlen_q, p.shape.heads_q, p.shape.head_dim};
  Options options;
  options.causal = true;
  DeviceBuffer<__nv_bfloat16> expected_out(p.q_elements);
  forward(p.args(expected_out), options, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> expected = bits(expected_out);

  // Two streams, 20 launches each, interleaved; each launch has its own output.
  constexpr int kLaunches = 20;
  cudaStream_t streams[2];
  for (cudaStream_t& stream : streams) ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::unique_ptr<DeviceBuffer<__nv_bfloat16>>> outs;
  for (int i = 0; i < 2 * kLaunches; ++i) {
    outs.push_back(std::make_unique<DeviceBuffer<__nv_bfloat16>>(p.q_elements));
    outs.back()->poison();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the poison is on the legacy stream
  for (int i = 0; i < 2 * kLaunches; ++i) forward(p.args(*outs[i]), options, streams[i % 2]);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < 2 * kLaunches; ++i)
    EXPECT_TRUE(testing::bitwise_equal(expected, bits(*outs[i]), dims)) << "launch " << i << " on stream " << i % 2;

  // Graphs: streams[0] already has a counter; `fresh` is first seen while capturing.
  cudaStream_t fresh;
  ASSERT_EQ(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking), cudaSuccess);
  for (cudaStream_t stream : {streams[0], fresh}) {
    DeviceBuffer<__nv_bfloat16> out(p.q_elements);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    forward(p.args(out), options, stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 5; ++replay) {
      out.poison();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_TRUE(testing::bitwise_equal(expected, bits(out), dims))
          << "graph replay " << replay << (stream == fresh ? " (static order)" : " (dynamic claims)");
    }
    // A plain launch on the same stream after the replays still finds the counter at zero.
    out.poison();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    forward(p.args(out), options, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_TRUE(testing::bitwise_equal(expected, bits(out), dims)) << "launch after the graph";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
  cudaStreamDestroy(fresh);
}

}  // namespace
}  // namespace dash_attn
