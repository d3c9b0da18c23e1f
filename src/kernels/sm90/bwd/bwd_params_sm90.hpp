// Device-ready parameters of the sm90 backward main kernel: TMA descriptors,
// the schedule and raw pointers into the caller's tensors and the workspace.
#pragma once

#include <cstdint>

#include "bwd_dq_layout.hpp"
#include "bwd_traits_sm90.hpp"
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
  TmaStoreK tma_dk, tma_dv;  // MHA outputs, where the epilogue stores them asynchronously
  // The schedule object the DAG model runs too: claim order, Q-tile order, ranks.
  schedule::Schedule schedule{ScheduleKind::kAtomic};
  schedule::TileProblem problem;
  int total_items = 0;
  float scale_log2 = 0.f;      // softmax_scale * log2(e): P = exp2(S * scale_log2 - lse_log2)
  float softmax_scale = 0.f;   // applied to dK here, to dQ in the postprocess

  // Workspace, rows padded to q_tiles * kBlockM per (batch, q-head).
  const float* lse_log2 = nullptr;
  const float* dpsum = nullptr;
  float* dq_accum = nullptr;     // one contiguous kBlockM x d tile per (batch, head, q tile), see dq_offset()
  int* dq_counters = nullptr;    // per (batch, head, q tile)
  // GQA/MQA: fp32 (batch, heads_kv, kv_tiles * kBlockN, d) row-major, and
  // counters per (batch, kv-head, kv tile); null for MHA.
  float* dk_accum = nullptr;
  float* dv_accum = nullptr;
  int* dk_counters = nullptr;
  int* dv_counters = nullptr;
  // MHA outputs, written directly.
  Element* dk = nullptr;
  Element* dv = nullptr;
  int64_t dk_strides[3] = {};  // batch, seq, head (elements)
  int64_t dv_strides[3] = {};
  int* work_counter = nullptr;   // next unclaimed work index, zeroed before the launch
  // The producer may claim an item while the CTA still works on the previous
  // one: true when every wait targets an earlier claim (not for wave schedules).
  bool claim_ahead = true;
};

}  // namespace dash_attn::sm90::bwd
