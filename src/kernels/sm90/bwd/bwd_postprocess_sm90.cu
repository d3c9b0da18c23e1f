// Backward postprocess: dQ = softmax_scale * fp32 accumulator, converted to
// the output dtype; for GQA/MQA also dK, dV from their fp32 accumulators
// (dK was scaled before it was added). One CTA per (tile, head, sequence)
// (varlen: over the longest sequence's tiles, the others return); each
// thread converts 8 consecutive columns of a row (one 16-byte store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "bwd_dq_layout.hpp"
#include "dash_attn/cuda_check.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 8;

struct ConvertParams {
  const float* accum;  // one block_rows x head_dim tile per slot (accumulator_tiles.hpp)
  // Ordered dQ adds: the adds made per slot (the accumulator was not zeroed:
  // a slot at 0 holds nothing and converts to zeros); null otherwise.
  const int32_t* counters;
  void* out;
  int64_t out_strides[3];  // batch, seq, head (elements)
  schedule::TileProblem problem;  // each sequence's rows
  plan::AccumulatorTiles slots;
  bool keys;       // the KV side (dK, dV: kv-heads, block_n rows) or the Q side (dQ)
  int head_dim, block_rows;
  float scale;
  bool dq_layout;  // bwd::dq_offset's fragment order (dQ) or plain row-major (dK, dV)
  int first_sequence;  // of this launch (grid.z holds at most 65535)
};

template <class Element>
__global__ void __launch_bounds__(kThreads) bwd_convert_kernel(ConvertParams p) {
  const int tile = blockIdx.x, head = blockIdx.y, batch = blockIdx.z + p.first_sequence;
  const schedule::SequenceRows rows = p.keys ? p.problem.rows_k(batch) : p.problem.rows_q(batch);
  if (tile * p.block_rows >= rows.length) return;
  const int64_t slot =
      (p.keys ? p.slots.first_kv_tile(p.problem, batch, head) : p.slots.first_q_tile(p.problem, batch, head)) + tile;
  const float* accum = p.accum + slot * p.block_rows * p.head_dim;
  const bool written = p.counters == nullptr || p.counters[slot] != 0;
  const int vectors_per_row = p.head_dim / kVector;
  for (int v = threadIdx.x; v < p.block_rows * vectors_per_row; v += kThreads) {
    const int local_row = v / vectors_per_row;
    const int col = (v % vectors_per_row) * kVector;
    const int row = tile * p.block_rows + local_row;
    if (row >= rows.length) break;
    float values[kVector] = {};
    if (!written) {
      // no contribution: zeros
    } else if (p.dq_layout) {
      // dQ's fragment order keeps pairs of adjacent columns together.
      for (int pair = 0; pair < kVector; pair += 2) {
        const float2 v = *reinterpret_cast<const float2*>(
            accum + bwd::dq_offset(local_row, col + pair, p.block_rows, p.head_dim));
        values[pair] = v.x, values[pair + 1] = v.y;
      }
    } else {
      const float* src = accum + local_row * p.head_dim + col;
      const float4 lo = *reinterpret_cast<const float4*>(src);
      const float4 hi = *reinterpret_cast<const float4*>(src + 4);
      values[0] = lo.x, values[1] = lo.y, values[2] = lo.z, values[3] = lo.w;
      values[4] = hi.x, values[5] = hi.y, values[6] = hi.z, values[7] = hi.w;
    }
    alignas(16) Element converted[kVector];
    for (int i = 0; i < kVector; ++i) converted[i] = static_cast<Element>(values[i] * p.scale);
    Element* dst = static_cast<Element*>(p.out) + batch * p.out_strides[0] + (rows.begin + row) * p.out_strides[1] +
                   head * p.out_strides[2] + col;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(converted);
  }
}

// One launch per 65535 sequences (grid.z's limit).
void launch_convert(DType dtype, ConvertParams p, int64_t sequences, int tiles, int64_t heads, cudaStream_t stream) {
  constexpr int64_t kMaxGridZ = 65535;
  for (int64_t first = 0; first < sequences; first += kMaxGridZ) {
    ConvertParams chunk = p;
    chunk.first_sequence = static_cast<int>(first);
    const dim3 grid(tiles, static_cast<unsigned>(heads), static_cast<unsigned>(std::min(kMaxGridZ, sequences - first)));
    if (dtype == DType::kBF16)
      bwd_convert_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(chunk);
    else
      bwd_convert_kernel<__half><<<grid, kThreads, 0, stream>>>(chunk);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
}

ConvertParams convert_params(const float* accum, const int32_t* counters, const TensorView& out,
                             const schedule::TileProblem& problem, const plan::AccumulatorTiles& slots, bool keys,
                             int head_dim, int block_rows, float scale) {
  ConvertParams p{};
  p.accum = accum;
  p.counters = counters;
  p.out = out.data;
  p.out_strides[0] = out.batch_stride, p.out_strides[1] = out.seq_stride, p.out_strides[2] = out.head_stride;
  p.problem = problem;
  p.slots = slots;
  p.keys = keys;
  p.head_dim = head_dim;
  p.block_rows = block_rows;
  p.scale = scale;
  p.dq_layout = !keys;
  return p;
}

}  // namespace

void launch_backward_postprocess(const BackwardArgs& a, const plan::BackwardWorkspace& w,
                                 const schedule::TileProblem& problem, float softmax_scale, cudaStream_t stream) {
  const ProblemShape& s = a.shape;
  const int d = static_cast<int>(s.head_dim);
  auto accum = [&](const plan::WorkspaceSlice& slice) { return slice.in<const float>(a.workspace); };
  const auto* dq_counters = w.dq_counters.in<const int32_t>(a.workspace);
  launch_convert(a.dtype,
                 convert_params(accum(w.dq_accum), dq_counters, a.dq, problem, w.accum, false, d, w.tile.block_m,
                                softmax_scale),
                 s.batch, w.q_tiles, s.heads_q, stream);
  if (!w.dk_accum.bytes) return;
  for (const auto& [slice, out] : {std::pair{w.dk_accum, a.dk}, std::pair{w.dv_accum, a.dv}})
    launch_convert(a.dtype, convert_params(accum(slice), nullptr, out, problem, w.accum, true, d, w.tile.block_n, 1.f),
                   s.batch, w.kv_tiles, s.heads_kv, stream);
}

}  // namespace dash_attn::sm90
