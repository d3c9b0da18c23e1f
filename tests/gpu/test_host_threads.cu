// The API called from a host thread that never used CUDA, while another
// thread keeps its own stream busy. Before the entry points made the tensors'
// device current, the forward's TMA descriptors failed there
// (CUDA_ERROR_INVALID_CONTEXT), the kernel launched anyway and the context
// died (H200, 2026-12-01, through Python threads).
#include <atomic>
#include <string>
#include <thread>

#include "backward_harness.hpp"

namespace dash_attn {
namespace {

using testing::BackwardCase;
using testing::BackwardProblem;
using testing::BackwardRunner;
using testing::DeviceBuffer;

__global__ void keep_busy(float* sink) {
  float x = threadIdx.x;
  for (int i = 0; i < 100000; ++i) x = x * 0.999f + 1.0f;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

TEST(HostThreads, FreshThreadBesideABusyStreamGivesTheSameBits) {
  DASH_REQUIRE_SM90();
  DASH_REQUIRE_ROWS(DType::kBF16, 128);
  const BackwardCase c{DType::kBF16, ProblemShape{2, 700, 700, 4, 2, 128}, true, ScheduleKind::kAuto, true, false};
  const BackwardProblem problem(c, 11);
  BackwardRunner runner(problem);
  const Options options = runner.options();
  DeviceBuffer<uint16_t> out(runner.q_elements());
  DeviceBuffer<float> lse(c.shape.batch * c.shape.heads_q * c.shape.seqlen_q);
  // Reference on this thread, on the default stream, as Python's threads use it.
  out.poison();
  forward(runner.forward_args(out, lse), options, nullptr);
  DASH_TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<uint16_t> out_reference = out.download();
  runner.run(options);
  const testing::GradientBits reference = runner.bits();

  std::atomic<bool> stop{false};
  DeviceBuffer<float> sink(64 * 128);
  std::thread busy([&] {
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return;
    while (!stop.load()) {
      keep_busy<<<64, 128, 0, stream>>>(sink.get());
      cudaStreamSynchronize(stream);
    }
    cudaStreamDestroy(stream);
  });
  out.poison();
  std::string failure;
  // The fresh thread's first CUDA work is dash_attn's forward.
  std::thread fresh([&] {
    try {
      forward(runner.forward_args(out, lse), options, nullptr);
      runner.run(options);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  fresh.join();
  stop.store(true);
  busy.join();
  ASSERT_TRUE(failure.empty()) << failure;
  DASH_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(out.download(), out_reference) << "forward output differs on a fresh thread";
  const testing::GradientBits grads = runner.bits();
  EXPECT_EQ(grads.dq, reference.dq);
  EXPECT_EQ(grads.dk, reference.dk);
  EXPECT_EQ(grads.dv, reference.dv);
}

TEST(HostThreads, PointersOfTheWrongKindAreRefusedByName) {
  DASH_REQUIRE_SM90();
  const BackwardCase c{DType::kBF16, ProblemShape{1, 128, 128, 2, 2, 64}, false, ScheduleKind::kAuto, true, false};
  const BackwardProblem problem(c, 3);
  BackwardRunner runner(problem);
  DeviceBuffer<uint16_t> out(runner.q_elements());
  DeviceBuffer<float> lse(c.shape.heads_q * c.shape.seqlen_q);
  alignas(16) static uint16_t host_memory[128 * 2 * 64];
  ForwardArgs args = runner.forward_args(out, lse);
  args.k.data = host_memory;
  try {
    forward(args, runner.options(), nullptr);
    ADD_FAILURE() << "a host pointer for k was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("argument 'k': expected device memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the refusal left a CUDA error behind";
}

}  // namespace
}  // namespace dash_attn
