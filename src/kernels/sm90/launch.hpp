// The one boundary between host planning and compiled sm90 kernels. Host code
// calls these after validation; they pick the compiled instantiation.
#pragma once

#include "dash_attn/api.hpp"
#include "../../host/backward_plan.hpp"

namespace dash_attn::sm90 {

void launch_forward(const ForwardArgs& args, float softmax_scale, bool causal, cudaStream_t stream);

// D = rowsum(dO * O), LSE in log2 units, zero dQ accumulator and counters.
void launch_backward_preprocess(const BackwardArgs& args, const host::BackwardWorkspace& workspace, cudaStream_t stream);

}  // namespace dash_attn::sm90
