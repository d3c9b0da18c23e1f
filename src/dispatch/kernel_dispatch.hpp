// The one dispatch point: runtime (pass, dtype, head_dim, score mods) -> the compiled row
// of the kernel table (dash_attn/compiled_kernels.hpp); a row this build did
// not compile is refused with a sentence naming it.
#pragma once

#include "kernels/sm90/launch.hpp"

namespace dash_attn::dispatch {

// score_mods: the request has a window or a softcap (host::has_score_mods).
void launch_forward(const ForwardArgs& args, const sm90::ForwardConfig& config, const schedule::ForwardPlan& plan,
                    bool score_mods, cudaStream_t stream);

void launch_forward_varlen(const VarlenForwardArgs& args, const sm90::ForwardConfig& config,
                           const schedule::VarlenForwardTiles& tiles, bool score_mods, cudaStream_t stream);

void launch_backward_main(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                          const sm90::BackwardMainConfig& config, bool score_mods, cudaStream_t stream);

// SMs of the current device less sm_margin; throws kInvalidArgument naming
// options.sm_margin when that leaves none.
int usable_sm_count(const char* function, int sm_margin);

// CTAs of the backward main kernel that can be resident on sm_count SMs at once.
int backward_main_capacity(int sm_count);

}  // namespace dash_attn::dispatch
