// Backward postprocess: dQ = softmax_scale * fp32 accumulator, converted to
// the output dtype; for GQA/MQA also dK, dV from their fp32 accumulators
// (dK was scaled before it was added). One CTA per tile; each thread converts
// 8 consecutive columns of a row (one 16-byte store).
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
  const float* accum;  // per (batch, head): tiles * block_rows rows of head_dim floats
  void* out;
  int64_t out_strides[3];  // batch, seq, head (elements)
  int seqlen, heads, head_dim, block_rows, tiles;
  float scale;
  bool dq_layout;  // rows swizzled as bwd::dq_offset (dQ) or plain row-major (dK, dV)
};

template <class Element>
__global__ void __launch_bounds__(kThreads) bwd_convert_kernel(ConvertParams p) {
  const int tile = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(batch) * p.heads + head;
  const float* accum = p.accum + (bh * p.tiles + tile) * p.block_rows * p.head_dim;
  const int vectors_per_row = p.head_dim / kVector;
  for (int v = threadIdx.x; v < p.block_rows * vectors_per_row; v += kThreads) {
    const int local_row = v / vectors_per_row;
    const int col = (v % vectors_per_row) * kVector;
    const int row = tile * p.block_rows + local_row;
    if (row >= p.seqlen) break;
    // The dQ swizzle XORs multiples of 8 into the column: 8 aligned columns stay contiguous.
    const float* src = accum + (p.dq_layout ? bwd::dq_offset(local_row, col, p.head_dim) : local_row * p.head_dim + col);
    const float4 lo = *reinterpret_cast<const float4*>(src);
    const float4 hi = *reinterpret_cast<const float4*>(src + 4);
    const float values[kVector] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) Element converted[kVector];
    for (int i = 0; i < kVector; ++i) converted[i] = static_cast<Element>(values[i] * p.scale);
    Element* dst = static_cast<Element*>(p.out) + batch * p.out_strides[0] + row * p.out_strides[1] +
                   head * p.out_strides[2] + col;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(converted);
  }
}

void launch_convert(DType dtype, ConvertParams p, int64_t batch, int64_t accum_batch_floats, int64_t out_batch_stride,
                    cudaStream_t stream) {
  // Batch goes in grid.z (limit 65535); larger batches are split into launches.
  constexpr int64_t kMaxGridZ = 65535;
  for (int64_t first = 0; first < batch; first += kMaxGridZ) {
    ConvertParams chunk = p;
    chunk.accum = p.accum + first * accum_batch_floats;
    chunk.out = static_cast<char*>(p.out) + first * out_batch_stride * 2;
    const dim3 grid(p.tiles, p.heads, static_cast<unsigned>(std::min(kMaxGridZ, batch - first)));
    if (dtype == DType::kBF16)
      bwd_convert_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(chunk);
    else
      bwd_convert_kernel<__half><<<grid, kThreads, 0, stream>>>(chunk);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
}

ConvertParams convert_params(const float* accum, const TensorView& out, int64_t seqlen, int64_t heads, int head_dim,
                             int block_rows, int tiles, float scale, bool dq_layout) {
  ConvertParams p{};
  p.accum = accum;
  p.out = out.data;
  p.out_strides[0] = out.batch_stride, p.out_strides[1] = out.seq_stride, p.out_strides[2] = out.head_stride;
  p.seqlen = static_cast<int>(seqlen);
  p.heads = static_cast<int>(heads);
  p.head_dim = head_dim;
  p.block_rows = block_rows;
  p.tiles = tiles;
  p.scale = scale;
  p.dq_layout = dq_layout;
  return p;
}

}  // namespace

void launch_backward_postprocess(const BackwardArgs& a, const plan::BackwardWorkspace& w, float softmax_scale,
                                 cudaStream_t stream) {
  const ProblemShape& s = a.shape;
  const int d = static_cast<int>(s.head_dim);
  const char* base = static_cast<const char*>(a.workspace);
  const int64_t q_batch_floats = s.heads_q * static_cast<int64_t>(w.q_tiles) * w.tile.block_m * d;
  launch_convert(a.dtype,
                 convert_params(reinterpret_cast<const float*>(base + w.dq_accum.offset), a.dq, s.seqlen_q, s.heads_q, d,
                                w.tile.block_m, w.q_tiles, softmax_scale, true),
                 s.batch, q_batch_floats, a.dq.batch_stride, stream);
  if (!w.dk_accum.bytes) return;
  const int64_t kv_batch_floats = s.heads_kv * static_cast<int64_t>(w.kv_tiles) * w.tile.block_n * d;
  launch_convert(a.dtype,
                 convert_params(reinterpret_cast<const float*>(base + w.dk_accum.offset), a.dk, s.seqlen_k, s.heads_kv,
                                d, w.tile.block_n, w.kv_tiles, 1.f, false),
                 s.batch, kv_batch_floats, a.dk.batch_stride, stream);
  launch_convert(a.dtype,
                 convert_params(reinterpret_cast<const float*>(base + w.dv_accum.offset), a.dv, s.seqlen_k, s.heads_kv,
                                d, w.tile.block_n, w.kv_tiles, 1.f, false),
                 s.batch, kv_batch_floats, a.dv.batch_stride, stream);
}

}  // namespace dash_attn::sm90
