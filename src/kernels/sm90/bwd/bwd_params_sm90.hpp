// Device-ready parameters of the sm90 backward main kernel: TMA descriptors,
// the schedule and raw pointers into the caller's tensors and the workspace.
#pragma once

#include <cstdint>

#include "bwd_dq_layout.hpp"
#include "bwd_traits_sm90.hpp"
#include "dash_attn/plan/accumulator_tiles.hpp"
#include "dash_attn/plan/backward_plan.hpp"
#include "dash_attn/schedule/schedule.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdParams {
  using Element = typename Traits::Element;
  // (seqlen, head_dim, heads, batch): the layout every TMA-loaded tensor is described with.
  using GmemLayout = Layout<Shape<int, Int<Traits::kHeadDim>, int, int>, Stride<int64_t, _1, int64_t, int64_t>>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemLayout{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, typename Traits::SmemLayoutQStage{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, typename Traits::SmemLayoutK{}));
  using TmaStoreK = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensor{}, typename Traits::SmemLayoutK{}));

  TmaQ tma_q, tma_dout;
  TmaK tma_k, tma_v;
  TmaStoreK tma_dk, tma_dv;  // dK, dV when a chain stores them (dk_accum null), asynchronously
  // The schedule object the DAG model runs too: claim order, Q-tile order, ranks.
  schedule::Schedule schedule{ScheduleKind::kAtomic, schedule::kChainClaimInterleave};
  schedule::TileProblem problem;
  // Varlen: the TMA tensors are the packed (total, head_dim, heads, 1) ones,
  // each chain offset by its sequence's first row; the producer finds the
  // items' sequences with a scan (no total_items: the host has no lengths).
  bool varlen = false;
  int total_items = 0;
  // exponent_scale (bwd_row_stats.hpp): softmax_scale * log2(e), or softcap *
  // log2(e) with a softcap (the score is then tanh(q.k * softcap_scale)).
  float scale_log2 = 0.f;
  float softcap_scale = 0.f;   // softmax_scale / softcap (read by kSoftcap kernels only)
  float softmax_scale = 0.f;   // applied to dK here, to dQ in the postprocess

  // Workspace: where each (sequence, head)'s tiles are (accumulator_tiles.hpp).
  plan::AccumulatorTiles accum;
  const float* minus_lse = nullptr;  // the preprocess's rows (bwd_row_stats.hpp)
  const float* minus_d = nullptr;
  float* dq_accum = nullptr;     // one contiguous kBlockM x d tile per slot, see dq_offset()
  int* dq_counters = nullptr;    // per slot
  // GQA/MQA chains over part of a group (Schedule::reduces_dkv): one fp32
  // kBlockN x d row-major tile and counter per KV slot; null otherwise.
  float* dk_accum = nullptr;
  float* dv_accum = nullptr;
  int* dk_counters = nullptr;
  int* dv_counters = nullptr;
  // The outputs, written directly unless dk_accum is set.
  Element* dk = nullptr;
  Element* dv = nullptr;
  int64_t dk_strides[3] = {};  // batch, seq, head (elements)
  int64_t dv_strides[3] = {};
  int* work_counter = nullptr;   // next unclaimed work index, zeroed before the launch
  // Varlen: nonzero when the preprocess found cu_seqlens not ascending
  // (workspace slots may collide): no add waits for a rank then.
  const int* unordered = nullptr;
  // Varlen: the sequences in claim order, longest first (sequence_claims_before),
  // and per claim position its run of equal lengths: first position, length.
  plan::SequenceOrder<const int32_t> sequence_order{};
  // The producer may claim an item while the CTA still works on the previous
  // one: true when every wait targets an earlier claim (not for wave schedules).
  bool claim_ahead = true;

  // Whether ordered adds may wait for their ranks (not with untrusted varlen lengths).
  __device__ bool trusts_ranks() const { return unordered == nullptr || *unordered == 0; }
  // A sequence's first row in the packed tensors, and the batch index of the TMA tensors.
  __device__ int first_row_q(int batch) const { return varlen ? problem.rows_q(batch).begin : 0; }
  __device__ int first_row_k(int batch) const { return varlen ? problem.rows_k(batch).begin : 0; }
  __device__ int tma_batch(int batch) const { return varlen ? 0 : batch; }
  // The TMA tensors' rows and batches (the launch describes the tensors with them too).
  __host__ __device__ int tma_rows_q() const { return varlen ? problem.total_q : problem.seqlen_q; }
  __host__ __device__ int tma_rows_k() const { return varlen ? problem.total_k : problem.seqlen_k; }
  __host__ __device__ int tma_batches() const { return varlen ? 1 : problem.batch; }
};

}  // namespace dash_attn::sm90::bwd
