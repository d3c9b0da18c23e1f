// Host side of one backward main-kernel instantiation: turns the logical
// arguments into BwdParams (TMA descriptors, workspace pointers) and launches.
// Included only by the per-instantiation bwd_main_sm90_*.cu files.
#pragma once

#include <cmath>
#include <string>

#include "bwd_kernel_sm90.hpp"
#include "dash_attn/cuda_check.hpp"
#include "kernels/sm90/launch.hpp"
#include "kernels/sm90/common/launch_sm90.hpp"
#include "kernels/sm90/common/tma_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
typename BwdParams<Traits>::GmemTensor gmem_tensor(const TensorView& t, int64_t batch, int64_t seqlen, int64_t heads) {
  using Element = typename Traits::Element;
  const int64_t seq_stride = tma_stride(seqlen, t.seq_stride, Traits::kHeadDim);
  const int64_t head_stride = tma_stride(heads, t.head_stride, seq_stride * seqlen);
  const int64_t batch_stride = tma_stride(batch, t.batch_stride, head_stride * heads);
  return make_tensor(make_gmem_ptr(static_cast<const Element*>(t.data)),
                     typename BwdParams<Traits>::GmemLayout(
                         make_shape(static_cast<int>(seqlen), Int<Traits::kHeadDim>{}, static_cast<int>(heads),
                                    static_cast<int>(batch)),
                         make_stride(seq_stride, _1{}, head_stride, batch_stride)));
}

template <class Traits>
void launch_backward_kernel(const BackwardArgs& a, const plan::BackwardWorkspace& w, const BackwardMainConfig& c,
                            cudaStream_t stream) {
  using Element = typename Traits::Element;
  const ProblemShape& s = a.shape;
  if (c.problem.block_m != Traits::kBlockM || c.problem.block_n != Traits::kBlockN)
    throw Error(ErrorCode::kNotSupported, "dash_attn::backward: the plan's tiles (" + std::to_string(c.problem.block_m) +
                                              " x " + std::to_string(c.problem.block_n) + ") are not the kernel's (" +
                                              std::to_string(Traits::kBlockM) + " x " +
                                              std::to_string(Traits::kBlockN) + ")");

  BwdParams<Traits> p;
  p.schedule = c.schedule;
  p.problem = c.problem;
  // Varlen: the packed tensors as one sequence of total rows.
  p.varlen = c.problem.is_varlen();
  auto q_side = [&](const TensorView& t) { return gmem_tensor<Traits>(t, p.tma_batches(), p.tma_rows_q(), s.heads_q); };
  auto k_side = [&](const TensorView& t) { return gmem_tensor<Traits>(t, p.tma_batches(), p.tma_rows_k(), s.heads_kv); };
  p.tma_q = make_tma_copy(SM90_TMA_LOAD{}, q_side(a.q), typename Traits::SmemLayoutQStage{});
  p.tma_dout = make_tma_copy(SM90_TMA_LOAD{}, q_side(a.dout), typename Traits::SmemLayoutQStage{});
  p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, k_side(a.k), typename Traits::SmemLayoutK{});
  p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, k_side(a.v), typename Traits::SmemLayoutK{});
  p.tma_dk = make_tma_copy(SM90_TMA_STORE{}, k_side(a.dk), typename Traits::SmemLayoutK{});
  p.tma_dv = make_tma_copy(SM90_TMA_STORE{}, k_side(a.dv), typename Traits::SmemLayoutK{});
  check_tma_descriptor(p.tma_q, "backward", "q");
  check_tma_descriptor(p.tma_dout, "backward", "dout");
  check_tma_descriptor(p.tma_k, "backward", "k");
  check_tma_descriptor(p.tma_v, "backward", "v");
  check_tma_descriptor(p.tma_dk, "backward", "dk");
  check_tma_descriptor(p.tma_dv, "backward", "dv");
  // Varlen lengths live on the device: the producer's scan finds the end.
  p.total_items = p.varlen ? 0 : p.schedule.total_items(c.problem);
  p.accum = w.accum;
  p.softmax_scale = c.softmax_scale;
  p.scale_log2 = exponent_scale(c.softmax_scale, c.softcap);
  p.softcap_scale = c.softcap > 0.f ? c.softmax_scale / c.softcap : 0.f;
  p.minus_lse = w.minus_lse.in<const float>(a.workspace);
  p.minus_d = w.minus_d.in<const float>(a.workspace);
  p.dq_accum = w.dq_accum.in<float>(a.workspace);
  p.dq_counters = w.dq_counters.in<int>(a.workspace);
  p.dk_accum = w.dk_accum.in<float>(a.workspace);
  p.dv_accum = w.dv_accum.in<float>(a.workspace);
  if (w.dkv_counters.bytes) {
    p.dk_counters = w.dkv_counters.in<int>(a.workspace);
    p.dv_counters = p.dk_counters + w.dkv_counters.bytes / sizeof(int) / 2;
  }
  p.dk = static_cast<Element*>(a.dk.data);
  p.dv = static_cast<Element*>(a.dv.data);
  const int64_t dk_strides[3] = {a.dk.batch_stride, a.dk.seq_stride, a.dk.head_stride};
  const int64_t dv_strides[3] = {a.dv.batch_stride, a.dv.seq_stride, a.dv.head_stride};
  for (int i = 0; i < 3; ++i) p.dk_strides[i] = dk_strides[i], p.dv_strides[i] = dv_strides[i];
  p.work_counter = w.work_counter.in<int>(a.workspace);
  p.unordered = w.unordered.in<const int>(a.workspace);
  if (const auto* slice = w.sequence_order.in<const int32_t>(a.workspace))
    p.sequence_order = plan::sequence_order_arrays(slice, c.problem.batch);
  // (Varlen runs no wave schedule; its lengths are not on the host anyway.)
  p.claim_ahead = p.varlen || p.schedule.required_coresidency(c.problem) <= 1;

  constexpr auto kernel = &bwd_main_kernel<Traits>;
  allow_dynamic_shared_memory<kernel>(Traits::kSmemBytes);
  DASH_CUDA_CHECK(cudaMemsetAsync(p.work_counter, 0, sizeof(int), stream));
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(c.grid);
  launch.blockDim = dim3(Traits::kThreads);
  launch.dynamicSmemBytes = Traits::kSmemBytes;
  launch.stream = stream;
  // Wave schedules wait on later members of a wave: all CTAs must be resident at once.
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = c.cooperative ? 1 : 0;
  launch.attrs = &cooperative;
  launch.numAttrs = 1;
  DASH_CUDA_CHECK(cudaLaunchKernelEx(&launch, kernel, p));
}

// A ScoreMods row: its softcap kernel when the call has a softcap.
template <class Element, int kHeadDim, bool kScoreMods>
void launch_backward_main_sm90(const BackwardArgs& a, const plan::BackwardWorkspace& w, const BackwardMainConfig& c,
                               cudaStream_t stream) {
  if constexpr (kScoreMods)
    if (c.softcap > 0.f) return launch_backward_kernel<BwdTraits<Element, kHeadDim, true, true>>(a, w, c, stream);
  launch_backward_kernel<BwdTraits<Element, kHeadDim, kScoreMods, false>>(a, w, c, stream);
}

}  // namespace dash_attn::sm90::bwd

namespace dash_attn::sm90 {

template <DType kDType, int kHeadDim, bool kScoreMods>
void run_backward_main(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                       const BackwardMainConfig& config, cudaStream_t stream) {
  using Element = std::conditional_t<kDType == DType::kBF16, cutlass::bfloat16_t, cutlass::half_t>;
  bwd::launch_backward_main_sm90<Element, kHeadDim, kScoreMods>(args, workspace, config, stream);
}

}  // namespace dash_attn::sm90
