// What the sm90 kernels offer the dispatch layer above them: one launcher
// per row of the kernel table (include/dash_attn/kernel_table.hpp), compiled
// in the generated instance units, and the passes' small kernels. Everything
// here is validated before it is called; nothing here includes host code.
#pragma once

#include "dash_attn/api.hpp"
#include "dash_attn/plan/backward_plan.hpp"
#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/schedule/schedule.hpp"

namespace dash_attn::sm90 {

// The score beyond q.k (the window is the plan's): kScoreMods rows honour a
// softcap and the arguments' sinks, the others are only called without.
struct ForwardConfig {
  float softmax_scale = 1.f;
  float softcap = 0.f;  // > 0: s = softcap * tanh(softmax_scale * q.k / softcap)
};

// What the host decided for the backward main kernel.
struct BackwardMainConfig {
  // Resolved kind (never kAuto) and claim order; the host sets both.
  schedule::Schedule schedule{ScheduleKind::kAtomic, schedule::kChainClaimInterleave};
  schedule::TileProblem problem;  // with the window (ScoreMods rows only)
  float softmax_scale = 1.f;
  float softcap = 0.f;       // as ForwardConfig::softcap (ScoreMods rows only)
  int grid = 1;              // CTAs launched; each claims work items until none is left
  bool cooperative = false;  // guarantee co-residency of the whole grid (wave schedules)
};

// The forward of one table row: O and LSE over the planned persistent grid.
template <DType kDType, int kHeadDim, bool kScoreMods>
void run_forward(const ForwardArgs& args, const ForwardConfig& config, const schedule::ForwardPlan& plan,
                 cudaStream_t stream);

// The backward main kernel of one table row: dK, dV (or their GQA
// accumulators) and the fp32 dQ accumulator.
template <DType kDType, int kHeadDim, bool kScoreMods>
void run_backward_main(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                       const BackwardMainConfig& config, cudaStream_t stream);

// The forward of one table row over a variable-length batch.
template <DType kDType, int kHeadDim, bool kScoreMods>
void run_forward_varlen(const VarlenForwardArgs& args, const ForwardConfig& config,
                        const schedule::VarlenForwardTiles& tiles, cudaStream_t stream);

// The forward's tile-claim counter for the current device and `stream`; null
// when none can be made now (the kernel then takes the static order).
int* forward_tile_counter(cudaStream_t stream);

// -D (D = rowsum(dO * O) - dlse) and -LSE as the main kernel reads them
// (bwd/bwd_row_stats.hpp: softmax_scale and softcap set the units), zero dQ accumulator and
// counters; with args.dsinks, the sinks' gradient (a fixed-order sum).
// `problem` gives each sequence's rows (a varlen batch's BackwardArgs view
// the packed tensors with batch_stride 0; backward_varlen in dispatch/api.cpp).
void launch_backward_preprocess(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                                const schedule::TileProblem& problem, float softmax_scale, float softcap,
                                cudaStream_t stream);

// Varlen: zero dQ, dK, dV rows that no sequence owns (lead, seqused slack,
// tail), before the other backward kernels run on the stream.
void launch_zero_unowned_gradient_rows(const BackwardArgs& args, const schedule::TileProblem& problem,
                                       cudaStream_t stream);

// Varlen forward: out = 0 and lse = -inf in the query rows no sequence owns,
// before the forward kernel runs on the stream.
void launch_clear_unowned_forward_rows(const VarlenForwardArgs& args, cudaStream_t stream);

// dQ = scale * accumulator in the output dtype; for GQA/MQA also dK, dV from their accumulators.
void launch_backward_postprocess(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                                 const schedule::TileProblem& problem, float softmax_scale, cudaStream_t stream);

}  // namespace dash_attn::sm90
