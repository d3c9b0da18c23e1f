"""dash_attn's forward and backward as torch.library custom ops: opaque to
torch.compile (fake implementations give shapes), autograd registered through
the op (gradients of out and of lse), workspace from torch's caching allocator
and the current stream used, so CUDA-graph capture works. The variable-length
forward and backward (fwd_varlen, bwd_varlen) are ops of their own, with the
same autograd: gradients of out and lse reach q, k, v (the length arrays get none)."""

from typing import Optional

import torch

from . import _library
from ._checks import needs_copy


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def _readable(t):
    """The tensor, or a contiguous copy where the kernels cannot read it in
    place. Inside the ops: data pointers are opaque to torch.compile's tracer."""
    return t.contiguous() if needs_copy(t) else t


@torch.library.custom_op("dash_attn::fwd", mutates_args=(), device_types="cuda")
def fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
        deterministic: bool, schedule: str, sm_margin: int) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = (_readable(t) for t in (q, k, v))
    batch, seqlen_q, heads_q, _ = q.shape
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    options = _library.make_options(causal, softmax_scale, deterministic, schedule, sm_margin=sm_margin)
    _library.forward(q, k, v, out, lse, options, _stream(q.device))
    return out, lse


@fwd.register_fake
def _(q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin):
    batch, seqlen_q, heads_q, _ = q.shape
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(
        (batch, heads_q, seqlen_q), dtype=torch.float32)


@torch.library.custom_op("dash_attn::bwd", mutates_args=(), device_types="cuda")
def bwd(dout: torch.Tensor, dlse: Optional[torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        out: torch.Tensor, lse: torch.Tensor, softmax_scale: float, causal: bool, deterministic: bool, schedule: str,
        sm_margin: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dlse: the gradient of lse, or None when lse was not used."""
    dout, q, k, v = (_readable(t) for t in (dout, q, k, v))
    if dlse is not None:
        dlse = dlse.contiguous()
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    options = _library.make_options(causal, softmax_scale, deterministic, schedule, sm_margin=sm_margin)
    workspace = torch.empty(_library.backward_workspace_size(q, k, options), dtype=torch.uint8, device=q.device)
    _library.backward(q, k, v, out, dout, lse, dlse, dq, dk, dv, workspace, options, _stream(q.device))
    return dq, dk, dv


@bwd.register_fake
def _(dout, dlse, q, k, v, out, lse, softmax_scale, causal, deterministic, schedule, sm_margin):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.settings = (softmax_scale, causal, deterministic, schedule, sm_margin)
    # An unused output's gradient arrives as None, not as zeros to read.
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    if dout is None:  # only lse was used
        dout = torch.zeros_like(out)
    dq, dk, dv = bwd(dout, dlse, q, k, v, out, lse, *ctx.settings)
    return dq, dk, dv, None, None, None, None, None


fwd.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("dash_attn::fwd_varlen", mutates_args=(), device_types="cuda")
def fwd_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, seqused_q: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor],
               max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool, deterministic: bool,
               schedule: str, sm_margin: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A variable-length batch: q (total_q, heads_q, head_dim), k and v
    (total_k, heads_kv, head_dim); lse (heads_q, total_q). deterministic and
    schedule are the backward's (kept for it by autograd)."""
    q, k, v = (_readable(t) for t in (q, k, v))
    cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k = _lengths(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)
    # The kernel writes a sequence's used rows only: with seqused_q the slack
    # rows would hold whatever the allocator left (a result that differs run
    # to run), so they start as out = 0, lse = -inf, as an empty row ends.
    if seqused_q is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        out = torch.zeros_like(q, memory_format=torch.contiguous_format)
        lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=torch.float32, device=q.device)
    # The forward has one schedule of its own: the backward's choice is not sent to it.
    options = _library.make_options(causal, softmax_scale, True, "auto", sm_margin=sm_margin)
    _library.forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, out,
                            lse, options, _stream(q.device))
    return out, lse


@fwd_varlen.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
      deterministic, schedule, sm_margin):
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty((q.shape[1], q.shape[0]),
                                                                                   dtype=torch.float32)


def _lengths(*arrays):
    """The kernels read the int32 length arrays as packed device arrays."""
    return tuple(t.contiguous() if t is not None else None for t in arrays)


@torch.library.custom_op("dash_attn::bwd_varlen", mutates_args=(), device_types="cuda")
def bwd_varlen(dout: torch.Tensor, dlse: Optional[torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               out: torch.Tensor, lse: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
               seqused_q: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor], max_seqlen_q: int,
               max_seqlen_k: int, softmax_scale: float, causal: bool, deterministic: bool, schedule: str,
               sm_margin: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fwd_varlen's backward in its layout; dlse: the gradient of lse, or None
    when lse was not used."""
    dout, q, k, v, out = (_readable(t) for t in (dout, q, k, v, out))
    lse = lse.contiguous()
    if dlse is not None:
        dlse = dlse.contiguous()
    cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k = _lengths(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)
    # Rows outside every sequence's used length are not written by the kernel:
    # zeros there, the gradient of a row no sequence reads.
    dq, dk, dv = (torch.zeros_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    options = _library.make_options(causal, softmax_scale, deterministic, schedule, sm_margin=sm_margin)
    lengths = (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k)
    workspace = torch.empty(_library.backward_varlen_workspace_size(q, k, *lengths, options), dtype=torch.uint8,
                            device=q.device)
    _library.backward_varlen(q, k, v, out, dout, lse, dlse, *lengths, dq, dk, dv, workspace, options,
                             _stream(q.device))
    return dq, dk, dv


@bwd_varlen.register_fake
def _(dout, dlse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
      softmax_scale, causal, deterministic, schedule, sm_margin):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup_context_varlen(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
     deterministic, schedule, sm_margin) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)
    ctx.settings = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic, schedule, sm_margin)
    ctx.set_materialize_grads(False)


def _backward_varlen(ctx, dout, dlse):
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k = ctx.saved_tensors
    if dout is None:  # only lse was used
        dout = torch.zeros_like(out)
    dq, dk, dv = bwd_varlen(dout, dlse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
                            *ctx.settings)
    # No gradient for the length arrays, the ints and the settings.
    return (dq, dk, dv) + (None,) * 11


fwd_varlen.register_autograd(_backward_varlen, setup_context=_setup_context_varlen)
