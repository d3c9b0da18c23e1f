// Backward preprocess: one CTA per (q tile, head, sequence); for a varlen
// batch the grid covers the longest sequence's tiles and the CTAs past a
// sequence's own return at once.
//  - -D, D = rowsum(dO * O) in fp32 (the softmax-gradient correction term),
//    less the optional lse gradient: lse's derivative by a score is its P, so
//    dS gains P * dlse, i.e. D - dlse in dS = P * (dP - D);
//  - -LSE in the units the main kernel reads it (bwd_row_stats.hpp), so it
//    computes P with one exp2; rows with LSE = -inf (fully masked) and
//    padding rows beyond seqlen_q get -inf, which makes every P of that row
//    exactly 0;
//  - the tile's reduction counter zeroed, so every call starts from the same
//    state whatever earlier calls left; its fp32 dQ accumulator zeroed only
//    for unordered adds (atomic schedule): ordered adds store their rank-0
//    contribution and the conversion reads a tile whose counter stayed 0 as
//    zeros. Zeroing writes the whole accumulator, read back by the first add
//    (268 MB at hdim 128, GQA 32/8, 16k tokens: this kernel took 133 us beside
//    a 611 us main kernel at 512 tokens, H200, 2026-12-05);
//  - with dsinks: each tile's share -sum_rows exp(sink - lse) * D of the
//    sinks' gradient (D as above, the sink's dP being 0), summed per head by
//    a second kernel over the tiles in a fixed order: deterministic;
//  - varlen: the main kernel's claim order of the sequences (longest first),
//    and whether the sequences' rows ascend, which keeps their workspace
//    tiles apart (accumulator_tiles.hpp); when they do not, the flag tells
//    the main kernel not to order its adds (it could wait forever).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "bwd_row_stats.hpp"

// Sequences are ranked by their work within a window's band (the ScoreMods
// main kernels see the same band).
#define DASH_DEVICE_WINDOWS 1
#include "dash_attn/cuda_check.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlockM = 128;  // the largest backward block_m (tile_config.hpp)
static_assert(backward_tile(64).block_m <= kMaxBlockM && backward_tile(128).block_m <= kMaxBlockM &&
                  backward_tile(256).block_m <= kMaxBlockM,
              "sink_terms holds one tile's rows");
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
  float* minus_lse;
  float* minus_d;
  float* dq_accum;
  int32_t* dq_counters;  // null for the atomic schedule
  int32_t* unordered;    // varlen: set to 1 when cu_seqlens do not ascend; null otherwise
  const float* sinks;    // heads_q logits, or null: no sink gradient
  float* sink_partials;  // per dQ slot, with sinks
  schedule::TileProblem problem;  // each sequence's rows
  plan::AccumulatorTiles accum;   // each (sequence, head)'s workspace tiles
  int head_dim, block_m;
  float lse_divisor;  // bwd::lse_divisor: minus_lse = -lse_log2 / lse_divisor
  int first_sequence;             // of this launch (grid.z holds at most 65535)
};

// Sequence s's rows begin no earlier than sequence s - 1's (clamped as the kernels read them).
__device__ bool ascends(const int32_t* cu_seqlens, int total, int s) {
  return mask::clamp_int(cu_seqlens[s + 1], 0, total) >= mask::clamp_int(cu_seqlens[s], 0, total);
}

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
  const int tile = blockIdx.x, head = blockIdx.y, batch = blockIdx.z + p.first_sequence;
  const schedule::TileProblem& problem = p.problem;
  if (p.unordered != nullptr && tile == 0 && head == 0 && threadIdx.x == 0 &&
      !(ascends(problem.cu_seqlens_q, problem.total_q, batch) && ascends(problem.cu_seqlens_k, problem.total_k, batch)))
    atomicOr(p.unordered, 1);
  const schedule::SequenceRows rows = problem.rows_q(batch);
  if (tile * p.block_m >= rows.length) return;
  const int64_t slot = p.accum.first_q_tile(problem, batch, head) + tile;
  const int lanes_per_row = p.head_dim / kVectorElems;
  const int chunk = threadIdx.x % lanes_per_row;
  const int rows_per_pass = kThreads / lanes_per_row;
  __shared__ float sink_terms[kMaxBlockM];
  const float sink_log2 = p.sinks != nullptr ? p.sinks[head] * static_cast<float>(M_LOG2E) : 0.0f;
#pragma unroll 4
  for (int local = threadIdx.x / lanes_per_row; local < p.block_m; local += rows_per_pass) {
    const int row = tile * p.block_m + local;
    const int64_t packed_row = rows.begin + row;
    float d = 0.0f;
    float lse_log2 = INFINITY;
    if (row < rows.length) {
      const auto* o = static_cast<const Element*>(p.out) + batch * p.out_strides[0] + packed_row * p.out_strides[1] +
                      head * p.out_strides[2];
      const auto* dout = static_cast<const Element*>(p.dout) + batch * p.dout_strides[0] +
                         packed_row * p.dout_strides[1] + head * p.dout_strides[2];
      d = dot_chunk(o + chunk * kVectorElems, dout + chunk * kVectorElems);
      const float lse = p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride + packed_row];
      if (lse != -INFINITY) lse_log2 = lse * static_cast<float>(M_LOG2E);
    }
    // The row's lanes are an aligned group of the warp: xor offsets below the
    // group size stay inside it (rows past the sequence contribute 0 in step).
    for (int offset = lanes_per_row / 2; offset > 0; offset /= 2) d += __shfl_xor_sync(0xffffffffu, d, offset);
    if (chunk == 0) {
      if (p.dlse != nullptr && row < rows.length)
        d -= p.dlse[batch * p.dlse_batch_stride + head * p.dlse_head_stride + packed_row];
      p.minus_d[slot * p.block_m + local] = -d;
      p.minus_lse[slot * p.block_m + local] = -lse_log2 / p.lse_divisor;
      // The sink's P is exp2(sink - lse) in log2 units: 0 for a padding row (lse_log2 = +inf).
      if (p.sinks != nullptr) sink_terms[local] = -exp2f(sink_log2 - lse_log2) * d;
    }
  }
  if (p.sinks != nullptr) {  // the same for every thread of the CTA
    __syncthreads();
    if (threadIdx.x == 0) {
      float sum = 0.0f;
      for (int local = 0; local < p.block_m; ++local) sum += sink_terms[local];  // row order: fixed
      p.sink_partials[slot] = sum;
    }
  }
  if (p.dq_counters != nullptr) {
    if (threadIdx.x == 0) p.dq_counters[slot] = 0;
    return;
  }
  float4* accum = reinterpret_cast<float4*>(p.dq_accum + slot * p.block_m * p.head_dim);
  const int accum_vectors = p.block_m * p.head_dim / 4;
  for (int i = threadIdx.x; i < accum_vectors; i += kThreads) accum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Varlen: sequence s's position in the main kernel's claim order, by
// counting the sequences that go before it (schedule::sequence_claims_before,
// a total order: the positions are a permutation). Every CTA first reads all
// sequences' claim keys into shared memory (independent loads), then each
// thread makes its O(batch) comparisons there: reading the lengths inside
// the comparison loop made it a chain of dependent L2 loads, 12 us for 32
// sequences on the H200 (2026-12-03, 2-3% of a 512-token backward). Larger
// batches (under 4 tokens per sequence in a 16k batch) keep their own order,
// each sequence a run of its own. The same loop counts s's run (the
// sequences of its lengths, adjacent in the order): at position - (members
// before s), run_length long; the main kernel deals each run's chain heads
// together (Schedule::work_item_of_run). Layout: plan::sequence_order_arrays.
constexpr int kMaxSortedSequences = 4096;  // 32 KB of keys

__global__ void __launch_bounds__(kThreads) varlen_sequence_order_kernel(schedule::TileProblem problem,
                                                                         int32_t* slice, int32_t* unordered) {
  const int s = blockIdx.x * kThreads + threadIdx.x;
  // The preprocess (next on the stream) sets the flag; clearing it here saves
  // a memset node (~1 us of a 32 x 512 hdim 64 backward's ~0.4 ms).
  if (s == 0) *unordered = 0;
  const auto [order, run_first, run_length] = plan::sequence_order_arrays(slice, problem.batch);
  if (problem.batch > kMaxSortedSequences) {
    if (s < problem.batch) {
      order[s] = s;
      run_first[s] = s;
      run_length[s] = 1;
    }
    return;
  }
  __shared__ schedule::SequenceClaimKey keys[kMaxSortedSequences];
  for (int t = threadIdx.x; t < problem.batch; t += kThreads) keys[t] = schedule::sequence_claim_key(problem, t);
  __syncthreads();
  if (s >= problem.batch) return;
  int position = 0, members = 0, members_before = 0;
  for (int t = 0; t < problem.batch; ++t) {
    const bool before = schedule::sequence_claims_before(keys[t], t, keys[s], s);
    const bool member = schedule::same_claim_run(keys[t], keys[s]);
    position += before ? 1 : 0;
    members += member ? 1 : 0;
    members_before += before && member ? 1 : 0;
  }
  order[position] = s;
  run_first[position] = position - members_before;
  run_length[position] = members;
}

// d sinks[h]: one CTA per q head sums the tiles' shares, each thread its
// sequences' tiles in order, then a fixed tree over the threads; the same
// bits on every run of the same batch.
__global__ void __launch_bounds__(kThreads) sink_gradient_kernel(const float* partials, schedule::TileProblem problem,
                                                                 plan::AccumulatorTiles accum, float* dsinks) {
  const int head = blockIdx.x;
  float sum = 0.0f;
  for (int b = threadIdx.x; b < problem.batch; b += kThreads) {
    const int tiles = (problem.rows_q(b).length + problem.block_m - 1) / problem.block_m;
    const int64_t first = accum.first_q_tile(problem, b, head);
    for (int t = 0; t < tiles; ++t) sum += partials[first + t];
  }
  __shared__ float sums[kThreads];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dsinks[head] = sums[0];
}

}  // namespace

void launch_backward_preprocess(const BackwardArgs& a, const plan::BackwardWorkspace& w,
                                const schedule::TileProblem& problem, float softmax_scale, float softcap,
                                cudaStream_t stream) {
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
  p.minus_lse = w.minus_lse.in<float>(a.workspace);
  p.minus_d = w.minus_d.in<float>(a.workspace);
  p.dq_accum = w.dq_accum.in<float>(a.workspace);
  p.dq_counters = w.dq_counters.in<int32_t>(a.workspace);
  p.unordered = w.unordered.in<int32_t>(a.workspace);
  p.problem = problem;
  p.accum = w.accum;
  p.sinks = a.dsinks != nullptr ? a.sinks : nullptr;  // the terms are only needed for the gradient
  p.sink_partials = w.sink_partials.in<float>(a.workspace);
  p.head_dim = static_cast<int>(a.shape.head_dim);
  p.block_m = w.tile.block_m;
  p.lse_divisor = bwd::lse_divisor(p.head_dim, softmax_scale, softcap);
  // Varlen only: the workspace has both slices or neither.
  if (auto* sequence_order = w.sequence_order.in<int32_t>(a.workspace)) {
    const auto blocks = static_cast<unsigned>((a.shape.batch + kThreads - 1) / kThreads);
    varlen_sequence_order_kernel<<<blocks, kThreads, 0, stream>>>(problem, sequence_order, p.unordered);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
  // Sequences go in grid.z (limit 65535); larger batches are split into launches.
  constexpr int64_t kMaxGridZ = 65535;
  for (int64_t first = 0; first < a.shape.batch; first += kMaxGridZ) {
    PreprocessParams chunk = p;
    chunk.first_sequence = static_cast<int>(first);
    const dim3 grid(w.q_tiles, static_cast<unsigned>(a.shape.heads_q),
                    static_cast<unsigned>(std::min(kMaxGridZ, a.shape.batch - first)));
    if (a.dtype == DType::kBF16)
      bwd_preprocess_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(chunk);
    else
      bwd_preprocess_kernel<__half><<<grid, kThreads, 0, stream>>>(chunk);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
  if (p.sinks != nullptr) {
    sink_gradient_kernel<<<static_cast<unsigned>(a.shape.heads_q), kThreads, 0, stream>>>(p.sink_partials, problem,
                                                                                         w.accum, a.dsinks);
    DASH_CUDA_CHECK(cudaGetLastError());
  }
  for (const plan::WorkspaceSlice* slice : {&w.dk_accum, &w.dv_accum, &w.dkv_counters})
    if (auto* bytes = slice->in<char>(a.workspace)) DASH_CUDA_CHECK(cudaMemsetAsync(bytes, 0, slice->bytes, stream));
}

}  // namespace dash_attn::sm90
