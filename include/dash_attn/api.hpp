// Public entry points. Raw device pointers and strides in, a CUDA stream for
// ordering; no framework types. Every function validates its arguments and
// throws dash_attn::Error with a message naming the offending argument.
#pragma once

#include <cstddef>

#include "dash_attn/error.hpp"
#include "dash_attn/types.hpp"

// The CUDA runtime's own declaration, repeated so this header needs no toolkit.
typedef struct CUstream_st* cudaStream_t;

namespace dash_attn {

// O = softmax(scale * Q K^T [masked]) V and the per-row LSE.
void forward(const ForwardArgs& args, const Options& options, cudaStream_t stream);

// The forward of a variable-length batch (types.hpp, VarlenForwardArgs): each
// sequence attends to its own keys only, causal bottom-right per sequence.
// A sequence's out and lse are bitwise the same whatever else is packed
// around it, and equal to forward() on that sequence alone. Rows no sequence
// owns (before the first, seqused slack, after the last) get out = 0 and
// lse = -inf, so the outputs need no initialisation.
void forward_varlen(const VarlenForwardArgs& args, const Options& options, cudaStream_t stream);

// dQ, dK, dV from dO, O and the forward's LSE. Deterministic (bitwise
// reproducible) unless options.schedule is kAtomic or options.deterministic is false.
void backward(const BackwardArgs& args, const Options& options, cudaStream_t stream);

// Bytes of device workspace backward() needs for this shape and options.
std::size_t backward_workspace_size(const ProblemShape& shape, const Options& options);

// The backward of a variable-length batch (types.hpp, VarlenBackwardArgs).
// Deterministic as backward(); in addition a sequence's dq, dk, dv are
// bitwise the same whatever else is packed around it, and equal to
// backward() on that sequence alone under the same schedule. Schedules:
// atomic, fa3, descending (auto: descending, whatever the lengths; backward()'s
// auto runs fa3 on short causal heads, schedule/resolve.hpp, so compare under
// fa3 or descending); the wave schedules (shift, symmetric_shift) are refused.
// Every row of dq, dk, dv is written: rows no sequence owns (before the
// first, seqused slack, after the last) get zero, their gradient, so the
// outputs need no initialisation.
void backward_varlen(const VarlenBackwardArgs& args, const Options& options, cudaStream_t stream);

// Bytes of device workspace backward_varlen() needs (a function of the
// totals, the batch and the heads, never of the device arrays' values).
std::size_t backward_varlen_workspace_size(const ProblemShape& shape, const VarlenLengths& lengths,
                                           const Options& options);

}  // namespace dash_attn
