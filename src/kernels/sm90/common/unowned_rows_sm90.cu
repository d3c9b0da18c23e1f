// Varlen: the rows of the outputs that no sequence owns (rows before the
// first sequence, a sequence's slack past its seqused length, rows after the
// last sequence) get defined values: zero gradients in dQ, dK, dV (no
// sequence reads those rows, so their gradient is zero), and in the
// forward out = 0, lse = -inf (what a row that sees no key gets). Writing them
// here lets the caller allocate the outputs uninitialised: zero-filled dq,
// dk, dv cost a full memset per call (16k tokens, GQA 32/8: 100 MB at hdim
// 64, 400 MB at hdim 256, i.e. 80-170 us of a 0.5-2.5 ms backward on the
// H200, 2026-12-03). A batch whose sequences tile the tensors (the usual
// case) has no such rows: the grid's CTAs read two length entries each and
// return (1.3 us per call).
//
// Rows are the clamped ones of schedule::sequence_rows, the rows the pass's
// other kernels write (the backward cuts sequences to max_seqlen, the
// forward does not). This kernel runs first on the stream, so where bad
// input (non-monotone cu_seqlens) makes a slot's slack overlap another
// sequence's rows, that sequence overwrites them afterwards: the result
// stays a function of the input.
#include <cmath>
#include <cstdint>

#include "dash_attn/cuda_check.hpp"
#include "dash_attn/schedule/sequence_rows.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorElems = 8;  // 16-byte stores of 16-bit elements
constexpr int kMaxTargets = 3;

// One side's sequences (queries or keys).
struct SideRows {
  const int32_t* cu_seqlens;
  const int32_t* seqused;
  int total;
  int bound;  // rows a sequence is cut to (schedule::kNoRowBound: none)
};

// A tensor whose rows are cleared: 16-bit elements set to 0, or (lse) fp32
// elements set to -inf.
struct RowTarget {
  void* data;
  int64_t seq_stride, head_stride;  // elements
  int heads, row_elements;          // per head: head_dim, or 1 for lse
  bool keys;                        // rows of the key side
  bool lse;
  bool vector;                      // 16-byte aligned 16-bit rows
};

struct UnownedRowsParams {
  RowTarget targets[kMaxTargets];
  SideRows queries, keys;
  int batch;
};

struct RowRange {
  int begin, end;
};

// Gap g: 0 = before the first sequence, 1 + s = sequence s's slack, batch + 1 = after the last.
__device__ RowRange unowned_rows(const SideRows& side, int batch, int gap) {
  if (gap == 0) return {0, mask::clamp_int(side.cu_seqlens[0], 0, side.total)};
  if (gap == batch + 1) return {mask::clamp_int(side.cu_seqlens[batch], 0, side.total), side.total};
  const int s = gap - 1;
  const schedule::SequenceRows rows = schedule::sequence_rows(side.cu_seqlens, side.seqused, side.total, s, side.bound);
  return {rows.begin + rows.length, mask::clamp_int(side.cu_seqlens[s + 1], rows.begin, side.total)};
}

template <class T, int kStep>
__device__ void fill(const RowTarget& t, RowRange rows, T value) {
  const int per_head = t.row_elements / kStep;
  const int64_t per_row = static_cast<int64_t>(t.heads) * per_head;
  const int64_t count = static_cast<int64_t>(rows.end - rows.begin) * per_row;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const int64_t row = rows.begin + i / per_row;
    const int64_t head = i % per_row / per_head;
    const int64_t e = i % per_head * kStep;
    *reinterpret_cast<T*>(static_cast<char*>(t.data) +
                          (row * t.seq_stride + head * t.head_stride + e) * (t.lse ? sizeof(float) : sizeof(uint16_t))) = value;
  }
}

__global__ void __launch_bounds__(kThreads) clear_unowned_rows_kernel(const UnownedRowsParams p) {
  const RowTarget& t = p.targets[blockIdx.y];
  const RowRange rows = unowned_rows(t.keys ? p.keys : p.queries, p.batch, blockIdx.x);
  if (rows.end <= rows.begin) return;
  if (t.lse)
    fill<float, 1>(t, rows, -INFINITY);
  else if (t.vector)
    fill<uint4, kVectorElems>(t, rows, make_uint4(0, 0, 0, 0));
  else
    fill<uint16_t, 1>(t, rows, uint16_t{0});
}

RowTarget rows_of(const TensorView& t, int64_t heads, int64_t head_dim, bool keys) {
  const bool vector = head_dim % kVectorElems == 0 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0 &&
                      t.seq_stride % kVectorElems == 0 && t.head_stride % kVectorElems == 0;
  return RowTarget{t.data, t.seq_stride, t.head_stride, static_cast<int>(heads), static_cast<int>(head_dim),
                   keys, false, vector};
}

SideRows side_rows(const int32_t* cu_seqlens, const int32_t* seqused, int64_t total, int bound) {
  return SideRows{cu_seqlens, seqused, static_cast<int>(total), bound};
}

void launch(const UnownedRowsParams& p, int targets, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.batch + 2), static_cast<unsigned>(targets));
  clear_unowned_rows_kernel<<<grid, kThreads, 0, stream>>>(p);
  DASH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_zero_unowned_gradient_rows(const BackwardArgs& a, const schedule::TileProblem& problem,
                                       cudaStream_t stream) {
  UnownedRowsParams p{};
  p.targets[0] = rows_of(a.dq, a.shape.heads_q, a.shape.head_dim, false);
  p.targets[1] = rows_of(a.dk, a.shape.heads_kv, a.shape.head_dim, true);
  p.targets[2] = rows_of(a.dv, a.shape.heads_kv, a.shape.head_dim, true);
  p.queries = side_rows(problem.cu_seqlens_q, problem.seqused_q, problem.total_q, problem.max_seqlen_q);
  p.keys = side_rows(problem.cu_seqlens_k, problem.seqused_k, problem.total_k, problem.max_seqlen_k);
  p.batch = problem.batch;
  launch(p, 3, stream);
}

void launch_clear_unowned_forward_rows(const VarlenForwardArgs& a, cudaStream_t stream) {
  UnownedRowsParams p{};
  p.targets[0] = rows_of(a.out, a.shape.heads_q, a.shape.head_dim, false);
  // lse is (heads, total_q) with the rows contiguous (types.hpp).
  p.targets[1] = RowTarget{a.lse.data, 1, a.lse.head_stride, static_cast<int>(a.shape.heads_q), 1, false, true, false};
  p.queries = side_rows(a.lengths.cu_seqlens_q, a.lengths.seqused_q, a.lengths.total_q, schedule::kNoRowBound);
  p.keys = p.queries;  // no key-side target
  p.batch = static_cast<int>(a.shape.batch);
  launch(p, 2, stream);
}

}  // namespace dash_attn::sm90
