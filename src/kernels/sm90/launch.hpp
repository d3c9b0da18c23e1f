// The one boundary between host planning and compiled sm90 kernels. Host code
// calls these after validation; they pick the compiled instantiation.
#pragma once

#include "dash_attn/api.hpp"
#include "../../host/backward_plan.hpp"
#include "dash_attn/schedule/schedule.hpp"

namespace dash_attn::sm90 {

// SMs of the current device less sm_margin; throws kInvalidArgument naming
// options.sm_margin when that leaves none.
int usable_sm_count(const char* function, int sm_margin);

void launch_forward(const ForwardArgs& args, float softmax_scale, bool causal, int sm_count, cudaStream_t stream);

// D = rowsum(dO * O), LSE in log2 units, zero dQ accumulator and counters.
void launch_backward_preprocess(const BackwardArgs& args, const host::BackwardWorkspace& workspace, cudaStream_t stream);

// What the host decided for the main kernel.
struct BackwardMainConfig {
  schedule::Schedule schedule{ScheduleKind::kAtomic};  // resolved kind (never kAuto) and claim order
  schedule::TileProblem problem;
  float softmax_scale = 1.f;
  int grid = 1;              // CTAs launched; each claims work items until none is left
  bool cooperative = false;  // guarantee co-residency of the whole grid (wave schedules)
};

// Main kernel: dK, dV (or their GQA accumulators) and the fp32 dQ accumulator.
void launch_backward_main(const BackwardArgs& args, const host::BackwardWorkspace& workspace,
                          const BackwardMainConfig& config, cudaStream_t stream);

// dQ = scale * accumulator in the output dtype; for GQA/MQA also dK, dV from their accumulators.
void launch_backward_postprocess(const BackwardArgs& args, const host::BackwardWorkspace& workspace,
                                 float softmax_scale, cudaStream_t stream);

// CTAs of the main kernel that can be resident on sm_count SMs at once.
int backward_main_capacity(const BackwardArgs& args, int sm_count);

template <DType kDType, int kHeadDim>
void launch_backward_main_instance(const BackwardArgs& args, const host::BackwardWorkspace& workspace,
                                   const BackwardMainConfig& config, cudaStream_t stream);

}  // namespace dash_attn::sm90
