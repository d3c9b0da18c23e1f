// The schedule objects compiled for the device produce the same trace as on
// the host: work items, chains, Q-tile orders, ranks, masks and GQA ranks,
// for every schedule and real shapes (odd lengths, seqlen_q != seqlen_k,
// GQA, varlen with device cu_seqlens). Skipped without an sm_90 GPU.
#include <gtest/gtest.h>

#include <vector>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "gpu_support.hpp"

namespace dash_attn::testing {
namespace {

using schedule::ChainCursor;
using schedule::Schedule;
using schedule::TileProblem;
using schedule::WorkItem;

// Ints one work item's record takes: a header, then per chain its KV tile,
// dK/dV rank and (q, rank, mask) per step.
DASH_HOST_DEVICE int record_size(const Schedule& s, const TileProblem& p, int k) {
  const WorkItem item = s.work_item(p, k);
  int size = 4;
  for (int c = 0; c < item.num_chains; ++c) size += 2 + 3 * item.tiles.chain_length(item.kv[c]);
  return size;
}

// The one function both sides run: host for the reference, device under test.
DASH_HOST_DEVICE void write_record(const Schedule& s, const TileProblem& p, int k, int* out) {
  const WorkItem item = s.work_item(p, k);
  *out++ = item.batch;
  *out++ = item.head_q;
  *out++ = item.head_kv;
  *out++ = item.num_chains;
  for (int c = 0; c < item.num_chains; ++c) {
    *out++ = item.kv[c];
    *out++ = s.dkv_rank(p, item.head_q);
    for (ChainCursor it = s.chain(item.tiles, item.kv[c]); it.valid(); it.advance()) {
      *out++ = it.q_tile();
      *out++ = it.rank();
      *out++ = it.needs_mask() ? 1 : 0;
    }
  }
}

__global__ void trace_kernel(Schedule s, TileProblem p, const int* offsets, int* out, int total) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < total) write_record(s, p, k, out + offsets[k]);
}

struct Shape {
  TileProblem problem;
  std::vector<int> seqlens_q, seqlens_k;  // varlen when not empty
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  out.push_back({TileProblem{2, 6, 2, 64, 128, false, 1000, 777}, {}, {}});
  out.push_back({TileProblem{1, 4, 4, 64, 128, true, 1, 1}, {}, {}});
  out.push_back({TileProblem{2, 4, 1, 64, 128, true, 700, 2500}, {}, {}});
  out.push_back({TileProblem{1, 2, 2, 128, 128, true, 16384, 16384}, {}, {}});  // several waves per head
  out.push_back({TileProblem{3, 4, 2, 128, 64, true, 0, 0}, {100, 0, 513}, {900, 64, 513}});
  out.push_back({TileProblem{3, 2, 2, 64, 64, false, 0, 0}, {4097, 5, 64}, {33, 5, 9000}});
  return out;
}

std::vector<int> prefix(const std::vector<int>& lengths) {
  std::vector<int> sums(1, 0);
  for (int l : lengths) sums.push_back(sums.back() + l);
  return sums;
}

TEST(ScheduleDeviceTrace, MatchesTheHost) {
  DASH_REQUIRE_SM90();
  for (Shape& shape : shapes()) {
    TileProblem host_problem = shape.problem;
    TileProblem device_problem = shape.problem;
    const bool varlen = !shape.seqlens_q.empty();
    const std::vector<int> cu_q = prefix(shape.seqlens_q), cu_k = prefix(shape.seqlens_k);
    DeviceBuffer<int> device_cu_q(cu_q.size()), device_cu_k(cu_k.size());
    if (varlen) {
      host_problem.batch = device_problem.batch = static_cast<int>(shape.seqlens_q.size());
      host_problem.cu_seqlens_q = cu_q.data();
      host_problem.cu_seqlens_k = cu_k.data();
      device_cu_q.upload(cu_q);
      device_cu_k.upload(cu_k);
      device_problem.cu_seqlens_q = device_cu_q.get();
      device_problem.cu_seqlens_k = device_cu_k.get();
    }
    for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift,
                              ScheduleKind::kSymmetricShift, ScheduleKind::kAuto}) {
      const Schedule s(schedule::resolve_schedule(kind, host_problem), host_problem);
      const int total = s.total_items(host_problem);
      std::vector<int> offsets(total + 1, 0);
      for (int k = 0; k < total; ++k) offsets[k + 1] = offsets[k] + record_size(s, host_problem, k);
      std::vector<int> expected(offsets[total]);
      for (int k = 0; k < total; ++k) write_record(s, host_problem, k, expected.data() + offsets[k]);

      DeviceBuffer<int> device_offsets(offsets.size()), device_out(expected.size() + 1);
      device_offsets.upload(offsets);
      device_out.poison();
      trace_kernel<<<(total + 127) / 128, 128>>>(s, device_problem, device_offsets.get(), device_out.get(), total);
      DASH_TEST_CUDA(cudaGetLastError());
      DASH_TEST_CUDA(cudaDeviceSynchronize());
      std::vector<int> actual = device_out.download();
      actual.pop_back();
      ASSERT_EQ(actual, expected) << "schedule " << to_string(kind) << ", batch " << host_problem.batch << ", "
                                  << total << " items";
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
