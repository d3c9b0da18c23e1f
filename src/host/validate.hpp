// Argument validation for the public API. Pure host code: every rule is
// tested in CI without a GPU. Each failure throws dash_attn::Error whose
// message names the function, the argument and what was expected.
#pragma once

#include <cstddef>

#include "dash_attn/types.hpp"

namespace dash_attn::host {

void validate_forward(const ForwardArgs& args, const Options& options);
void validate_forward_varlen(const VarlenForwardArgs& args, const Options& options);
void validate_backward(const BackwardArgs& args, const Options& options, std::size_t required_workspace_bytes);
// After validate_backward_varlen_problem: the tensors, the workspace, no aliasing.
void validate_backward_varlen(const VarlenBackwardArgs& args, std::size_t required_workspace_bytes);
// The shape, lengths and option rules of a varlen backward (what its
// workspace size needs); refuses the wave schedules by name.
void validate_backward_varlen_problem(const char* function, const ProblemShape& shape, const VarlenLengths& lengths,
                                      const Options& options);
// The shape and option rules alone, both passes.
void validate_problem(const char* function, const ProblemShape& shape, const Options& options);
// validate_problem and the backward's own option rules (what
// backward_workspace_size needs): a window refuses the wave schedules by name.
void validate_backward_problem(const char* function, const ProblemShape& shape, const Options& options);

// The kernels are sm_90a code: they run on compute capability 9.0 alone.
bool runs_sm90_kernels(int major, int minor);
// Throws kNotSupported naming the device and its compute capability unless it runs them.
void validate_device(const char* function, int device, const char* name, int major, int minor);

// A sliding window is set beyond what options.causal says (HeadTiles::has_window's rule).
bool has_window(const Options& options);
// Window or softcap: the request needs the kernels with score mods. Sinks
// need neither: every forward kernel adds them to the row sums in its
// epilogue (once per tile), and the backward main kernel sees them only
// through the forward's LSE (dsinks come from the preprocess).
bool has_score_mods(const Options& options);

// options.softmax_scale, or 1/sqrt(head_dim) when it is unset.
float resolved_softmax_scale(const ProblemShape& shape, const Options& options);

}  // namespace dash_attn::host
