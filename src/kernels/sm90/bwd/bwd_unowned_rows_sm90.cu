// Varlen backward: zeros in the dQ, dK, dV rows that no sequence owns (rows
// before the first sequence, a sequence's slack past its seqused length, rows
// after the last sequence). No sequence reads those rows, so their gradient
// is zero, and writing it here lets the caller allocate the gradients
// uninitialised: a zero-filled dq, dk, dv cost a full memset per call
// (16k tokens, GQA 32/8: 100 MB at hdim 64, 400 MB at hdim 256, i.e.
// 80-170 us of a 0.5-2.5 ms backward on the H200, 2026-12-03). A batch whose
// sequences tile the tensors (the usual case) has no such rows: the grid's
// CTAs read two length entries each and return.
//
// Rows are the clamped ones of schedule::sequence_rows, the rows the other
// backward kernels write. This kernel runs first on the stream, so where bad
// input (non-monotone cu_seqlens) makes a slot's slack overlap another
// sequence's rows, those rows are overwritten by that sequence afterwards:
// the result stays a function of the input.
#include <cstdint>

#include "dash_attn/cuda_check.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorElems = 8;  // 16-byte stores of 16-bit elements

struct GradientRows {
  uint16_t* data;
  int64_t seq_stride, head_stride;  // elements
  int heads;
};

struct UnownedRowsParams {
  GradientRows tensors[3];  // dq (query rows), dk, dv (key rows)
  schedule::TileProblem problem;
  int head_dim;
};

// Gap g of one side: 0 = before the first sequence, 1 + s = sequence s's
// slack, batch + 1 = after the last one.
struct RowRange {
  int begin, end;
};

__device__ RowRange unowned_rows(const schedule::TileProblem& p, bool keys, int gap) {
  const int32_t* cu = keys ? p.cu_seqlens_k : p.cu_seqlens_q;
  const int total = keys ? p.total_k : p.total_q;
  if (gap == 0) return {0, mask::clamp_int(cu[0], 0, total)};
  if (gap == p.batch + 1) return {mask::clamp_int(cu[p.batch], 0, total), total};
  const int s = gap - 1;
  const schedule::SequenceRows rows = keys ? p.rows_k(s) : p.rows_q(s);
  return {rows.begin + rows.length, mask::clamp_int(cu[s + 1], rows.begin, total)};
}

template <bool kVector>
__global__ void __launch_bounds__(kThreads) zero_unowned_rows_kernel(const UnownedRowsParams p) {
  const int which = blockIdx.y;
  const GradientRows t = p.tensors[which];
  const RowRange rows = unowned_rows(p.problem, which > 0, blockIdx.x);
  if (rows.end <= rows.begin) return;
  constexpr int kStep = kVector ? kVectorElems : 1;
  const int per_head = p.head_dim / kStep;
  const int64_t per_row = static_cast<int64_t>(t.heads) * per_head;
  const int64_t count = static_cast<int64_t>(rows.end - rows.begin) * per_row;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const int64_t row = rows.begin + i / per_row;
    const int64_t head = i % per_row / per_head;
    const int64_t d = i % per_head * kStep;
    uint16_t* at = t.data + row * t.seq_stride + head * t.head_stride + d;
    if constexpr (kVector)
      *reinterpret_cast<uint4*>(at) = make_uint4(0, 0, 0, 0);
    else
      *at = 0;
  }
}

GradientRows gradient_rows(const TensorView& t, int64_t heads) {
  return GradientRows{static_cast<uint16_t*>(t.data), t.seq_stride, t.head_stride, static_cast<int>(heads)};
}

bool vector_aligned(const TensorView& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.seq_stride % kVectorElems == 0 &&
         t.head_stride % kVectorElems == 0;
}

}  // namespace

void launch_zero_unowned_gradient_rows(const BackwardArgs& a, const schedule::TileProblem& problem,
                                       cudaStream_t stream) {
  UnownedRowsParams p{};
  p.tensors[0] = gradient_rows(a.dq, a.shape.heads_q);
  p.tensors[1] = gradient_rows(a.dk, a.shape.heads_kv);
  p.tensors[2] = gradient_rows(a.dv, a.shape.heads_kv);
  p.problem = problem;
  p.head_dim = static_cast<int>(a.shape.head_dim);
  const dim3 grid(static_cast<unsigned>(problem.batch + 2), 3);
  const bool vector = a.shape.head_dim % kVectorElems == 0 && vector_aligned(a.dq) && vector_aligned(a.dk) &&
                      vector_aligned(a.dv);
  if (vector)
    zero_unowned_rows_kernel<true><<<grid, kThreads, 0, stream>>>(p);
  else
    zero_unowned_rows_kernel<false><<<grid, kThreads, 0, stream>>>(p);
  DASH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dash_attn::sm90
