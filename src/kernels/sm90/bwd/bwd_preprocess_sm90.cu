// Backward preprocess: one CTA per (q tile, head, batch).
//  - D = rowsum(dO * O) in fp32 (the softmax-gradient correction term), less
//    the optional lse gradient: lse's derivative by a score is its P, so dS
//    gains P * dlse, i.e. D - dlse in dS = P * (dP - D);
//  - LSE converted to log2 units so the main kernel computes P with one exp2;
//    rows with LSE = -inf (fully masked) and padding rows beyond seqlen_q get
//    +inf, which makes every P of that row exactly 0;
//  - the fp32 dQ accumulator of the tile and its reduction counter zeroed, so
//    every call starts from the same state whatever earlier calls left.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "dash_attn/cuda_check.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorElems = 8;  // 16-byte loads of bf16/fp16

struct PreprocessParams {
  const void* out;
  const void* dout;
  int64_t out_strides[3];   // batch, seq, head (elements)
  int64_t dout_strides[3];
  const float* lse;
  int64_t lse_batch_stride, lse_head_stride;
  const float* dlse;  // null: no lse gradient
  int64_t dlse_batch_stride, dlse_head_stride;
  float* lse_log2;
  float* dpsum;
  float* dq_accum;
  int32_t* dq_counters;  // null for the atomic schedule
  int seqlen_q, heads_q, head_dim, block_m, q_tiles;
};

template <class Element>
__device__ float dot_chunk(const Element* a, const Element* b) {
  float sum = 0.0f;
  const uint4 va = *reinterpret_cast<const uint4*>(a);
  const uint4 vb = *reinterpret_cast<const uint4*>(b);
  const Element* ea = reinterpret_cast<const Element*>(&va);
  const Element* eb = reinterpret_cast<const Element*>(&vb);
#pragma unroll
  for (int i = 0; i < kVectorElems; ++i) sum += static_cast<float>(ea[i]) * static_cast<float>(eb[i]);
  return sum;
}

// Each row is read by head_dim / 8 consecutive lanes (8 to 32, a power of two),
// one 16-byte chunk of O and of dO each, so every lane loads and a CTA keeps
// kThreads / (head_dim / 8) rows in flight per pass; the unrolled passes
// issue their loads before the first shuffle reduction waits on them.
template <class Element>
__global__ void __launch_bounds__(kThreads) bwd_preprocess_kernel(PreprocessParams p) {
  const int tile = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(batch) * p.heads_q + head;
  const int64_t padded_rows = static_cast<int64_t>(p.q_tiles) * p.block_m;
  const int lanes_per_row = p.head_dim / kVectorElems;
  const int chunk = threadIdx.x % lanes_per_row;
  const int rows_per_pass = kThreads / lanes_per_row;
#pragma unroll 4
  for (int local = threadIdx.x / lanes_per_row; local < p.block_m; local += rows_per_pass) {
    const int row = tile * p.block_m + local;
    float d = 0.0f;
    float lse_log2 = INFINITY;
    if (row < p.seqlen_q) {
      const auto* o = static_cast<const Element*>(p.out) + batch * p.out_strides[0] + row * p.out_strides[1] +
                      head * p.out_strides[2];
      const auto* dout = static_cast<const Element*>(p.dout) + batch * p.dout_strides[0] +
                         row * p.dout_strides[1] + head * p.dout_strides[2];
      d = dot_chunk(o + chunk * kVectorElems, dout + chunk * kVectorElems);
      const float lse = p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride + row];
      if (lse != -INFINITY) lse_log2 = lse * static_cast<float>(M_LOG2E);
    }
    // The row's lanes are an aligned group of the warp: xor offsets below the
    // group size stay inside it (rows past seqlen_q contribute 0 in step).
    for (int offset = lanes_per_row / 2; offset > 0; offset /= 2) d += __shfl_xor_sync(0xffffffffu, d, offset);
    if (chunk == 0) {
      if (p.dlse != nullptr && row < p.seqlen_q) d -= p.dlse[batch * p.dlse_batch_stride + head * p.dlse_head_stride + row];
      p.dpsum[bh * padded_rows + row] = d;
      p.lse_log2[bh * padded_rows + row] = lse_log2;
    }
  }
  float4* accum = reinterpret_cast<float4*>(p.dq_accum + (bh * padded_rows + static_cast<int64_t>(tile) * p.block_m) * p.head_dim);
  const int accum_vectors = p.block_m * p.head_dim / 4;
  for (int i = threadIdx.x; i < accum_vectors; i += kThreads) accum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (p.dq_counters != nullptr && threadIdx.x == 0) p.dq_counters[bh * p.q_tiles + tile] = 0;
}

}  // namespace

void launch_backward_preprocess(const BackwardArgs& a, const plan::BackwardWorkspace& w, cudaStream_t stream) {
  auto* base = static_cast<char*>(a.workspace);
  PreprocessParams p{};
  p.out = a.out.data;
  p.dout = a.dout.data;
  p.out_strides[0] = a.out.batch_stride, p.out_strides[1] = a.out.seq_stride, p.out_strides[2] = a.out.head_stride;
  p.dout_strides[0] = a.dout.batch_stride, p.dout_strides[1] = a.dout.seq_stride, p.dout_strides[2] = a.dout.head_stride;
  p.lse = a.lse.data;
  p.lse_batch_stride = a.lse.batch_stride;
  p.lse_head_stride = a.lse.head_stride;
  p.dlse = a.dlse.data;
  p.dlse_batch_stride = a.dlse.batch_stride;
  p.dlse_head_stride = a.dlse.head_stride;
  p.lse_log2 = reinterpret_cast<float*>(base + w.lse_log2.offset);
  p.dpsum = reinterpret_cast<float*>(base + w.dpsum.offset);
  p.dq_accum = reinterpret_cast<float*>(base + w.dq_accum.offset);
  p.dq_counters = w.dq_counters.bytes ? reinterpret_cast<int32_t*>(base + w.dq_counters.offset) : nullptr;
  p.seqlen_q = static_cast<int>(a.shape.seqlen_q);
  p.heads_q = static_cast<int>(a.shape.heads_q);
  p.head_dim = static_cast<int>(a.shape.head_dim);
  p.block_m = w.tile.block_m;
  p.q_tiles = w.q_tiles;
  // Batch goes in grid.z (limit 65535); larger batches are split into launches.
  constexpr int64_t kMaxGridZ = 65535;
  for (int64_t first = 0; first < a.shape.batch; first += kMaxGridZ) {
    PreprocessParams chunk = p;
    const int64_t rows_before = first * a.shape.heads_q * w.q_tiles * w.tile.block_m;
    chunk.out = static_cast<const char*>(p.out) + first * a.out.batch_stride * 2;
    chunk.dout = static_cast<const char*>(p.dout) + first * a.dout.batch_stride * 2;
    chunk.lse = p.lse + first * a.lse.batch_stride;
    if (chunk.dlse) chunk.dlse = p.dlse + first * a.dlse.batch_stride;
    chunk.lse_log2 = p.lse_log2 + rows_before;
    chunk.dpsum = p.dpsum + rows_before;
    chunk.dq_accum = p.dq_accum + rows_before * a.shape.head_dim;
    if (chunk.dq_counters) chunk.dq_counters = p.dq_counters + first * a.shape.heads_q * w.q_tiles;
    const dim3 grid(w.q_tiles, p.heads_q, static_cast<unsigned>(std::min(kMaxGridZ, a.shape.batch - first)));
    if (a.dtype == DType::kBF16)
      bwd_preprocess_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(chunk);
    else
      bwd_preprocess_kernel<__half><<<grid, kThreads, 0, stream>>>(chunk);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
  if (w.dk_accum.bytes) DASH_CUDA_CHECK(cudaMemsetAsync(base + w.dk_accum.offset, 0, w.dk_accum.bytes, stream));
  if (w.dv_accum.bytes) DASH_CUDA_CHECK(cudaMemsetAsync(base + w.dv_accum.offset, 0, w.dv_accum.bytes, stream));
  if (w.dkv_counters.bytes) DASH_CUDA_CHECK(cudaMemsetAsync(base + w.dkv_counters.offset, 0, w.dkv_counters.bytes, stream));
}

}  // namespace dash_attn::sm90
