"""Plain torch attention for the Python tests: one sequence at a time, in
float64 (or another dtype, for the "naive" error bound), bottom-right causal,
with FlashAttention's sliding window, softcap and learnable sinks;
a variable-length batch as each of its sequences alone; and CPU kernels for
the varlen custom ops (forward by that reference, backward by the closed-form
gradient) and the fixed-length ones (backward from the out and lse it is
given), so the autograd wiring of flash_attn_varlen_func and the
transformers integration run on a machine without a GPU. Not a test module."""
import contextlib
import math

import torch


def visible(seqlen_q, seqlen_k, causal, device, window=(-1, -1)):
    """Key j visible from row i: FlashAttention's rule, bottom-right aligned
    (offset = seqlen_k - seqlen_q): j <= i + offset + right and j >= i +
    offset - left, each side only when >= 0; causal means right = 0."""
    left, right = window
    if causal:
        right = 0
    rows = torch.arange(seqlen_q, device=device)[:, None] + (seqlen_k - seqlen_q)
    cols = torch.arange(seqlen_k, device=device)[None, :]
    mask = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        mask &= cols <= rows + right
    if left >= 0:
        mask &= cols >= rows - left
    return mask


def capped(scores, softcap):
    """softcap * tanh(s / softcap), or s when softcap is 0."""
    return softcap * torch.tanh(scores / softcap) if softcap else scores


def probabilities(q, k, scale, causal, dtype, window=(-1, -1), softcap=0.0, sinks=None):
    """P (heads_q, seqlen_q, seqlen_k) of one sequence, 0 on rows without a key,
    the natural-log lse (heads_q, seqlen_q) (-inf on rows without a key, or
    the sink's logit there with sinks: lse = log(exp(sink) + sum_j exp(s_j))),
    and the key mask. Differentiable in q, k and the sinks."""
    groups = q.shape[1] // k.shape[1]
    qt = q.to(dtype).transpose(0, 1)
    kt = k.to(dtype).repeat_interleave(groups, 1).transpose(0, 1)
    mask = visible(q.shape[0], k.shape[0], causal, q.device, window)
    has_key = mask.any(dim=1)
    scores = capped((qt @ kt.transpose(-1, -2)) * scale, softcap)
    scores = scores.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        sink = sinks.to(dtype)[:, None, None].expand(-1, q.shape[0], 1)
        lse = torch.logsumexp(torch.cat([scores, sink], dim=-1), dim=-1)
        return torch.exp(scores - lse[..., None]), lse, has_key
    # Rows without a key: finite stand-in scores, their P set to 0 below.
    scores = scores.masked_fill(~has_key[:, None], 0.0)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None]) * has_key[:, None]
    return probs, torch.where(has_key, lse, torch.full_like(lse, float("-inf"))), has_key


def attend(q, k, v, scale=None, causal=False, dtype=torch.float64, window=(-1, -1), softcap=0.0, sinks=None):
    """One sequence: q (seqlen_q, heads_q, head_dim), k and v (seqlen_k,
    heads_kv, head_dim) -> out (seqlen_q, heads_q, head_dim) and lse (heads_q,
    seqlen_q) at dtype; rows without a key give out 0, lse -inf (the sink with
    sinks). window: FlashAttention's window_size; softcap: 0 off; sinks:
    (heads_q,) logits or None. Differentiable."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    groups = q.shape[1] // k.shape[1]
    if q.shape[0] == 0 or k.shape[0] == 0:  # zeros that stay in the autograd graph
        out = q.to(dtype) * 0 + 0 * (k.to(dtype).sum() + v.to(dtype).sum())
        if sinks is not None:
            return out, sinks.to(dtype)[:, None].expand(-1, q.shape[0]) + 0
        return out, torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=dtype, device=q.device)
    probs, lse, _ = probabilities(q, k, scale, causal, dtype, window, softcap, sinks)
    vt = v.to(dtype).repeat_interleave(groups, 1).transpose(0, 1)
    return (probs @ vt).transpose(0, 1), lse


def spans(cu_seqlens, seqused=None):
    """[(start, used, slot)] per sequence: its first row, used rows and slot length."""
    cu = cu_seqlens.tolist()
    used = seqused.tolist() if seqused is not None else None
    return [(cu[b], min(used[b], cu[b + 1] - cu[b]) if used is not None else cu[b + 1] - cu[b], cu[b + 1] - cu[b])
            for b in range(len(cu) - 1)]


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=None, causal=False, seqused_q=None,
                     seqused_k=None, dtype=torch.float64, window=(-1, -1), softcap=0.0, sinks=None):
    """A packed batch, each sequence run alone through attend(): out (total_q,
    heads_q, head_dim) and lse (heads_q, total_q) at dtype, differentiable;
    rows outside every sequence's used length give out 0, lse -inf.
    cu_seqlens_q must start at 0 and end at total_q (well-formed batches only)."""
    outs, lses = [], []
    for (sq, uq, slot_q), (sk, uk, _) in zip(spans(cu_seqlens_q, seqused_q), spans(cu_seqlens_k, seqused_k)):
        out, lse = attend(q[sq:sq + uq], k[sk:sk + uk], v[sk:sk + uk], softmax_scale, causal, dtype, window, softcap,
                          sinks)
        pad = slot_q - uq
        outs.append(torch.cat([out, out.new_zeros((pad,) + tuple(out.shape[1:]))]))
        lses.append(torch.cat([lse, lse.new_full((lse.shape[0], pad), float("-inf"))], dim=1))
    return torch.cat(outs), torch.cat(lses, dim=1)


def reference_varlen_grads(dout, dlse, q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, seqused_q=None,
                           seqused_k=None, window=(-1, -1), softcap=0.0, sinks=None):
    """dq, dk, dv (and dsinks, with sinks) of reference_varlen in closed form
    (float64, no autograd): each sequence's out and lse recomputed, then
    reference_grads_from_stats on it."""
    softmax_scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
    dq, dk, dv = (torch.zeros(t.shape, dtype=torch.float64, device=t.device) for t in (q, k, v))
    dsinks = torch.zeros(q.shape[1], dtype=torch.float64, device=q.device) if sinks is not None else None
    for (sq, uq, _), (sk, uk, _) in zip(spans(cu_seqlens_q, seqused_q), spans(cu_seqlens_k, seqused_k)):
        if uq == 0:
            continue
        rows, cols = slice(sq, sq + uq), slice(sk, sk + uk)
        with torch.no_grad():
            out, lse = attend(q[rows], k[cols], v[cols], softmax_scale, causal, torch.float64, window, softcap, sinks)
        grads = reference_grads_from_stats(dout[rows][None], dlse[:, rows][None] if dlse is not None else None,
                                           q[rows][None], k[cols][None], v[cols][None], out[None], lse[None],
                                           softmax_scale, causal, window, softcap, sinks)
        dq[rows], dk[cols], dv[cols] = (g[0] for g in grads[:3])
        if sinks is not None:
            dsinks += grads[3]
    return (dq, dk, dv) if sinks is None else (dq, dk, dv, dsinks)


def reference_grads_from_stats(dout, dlse, q, k, v, out, lse, softmax_scale, causal, window=(-1, -1), softcap=0.0,
                               sinks=None):
    """dq, dk, dv of fixed-length attention (batch, seqlen, heads, head_dim)
    as the kernels compute them: from the out and lse they are given (P =
    exp(S - lse), D = rowsum(dO * out) - dlse, dS = P * (dP - D), times
    1 - tanh^2 under softcap), not recomputed from q, k, v. So a chunk of keys
    gets its share of the gradient of attention over more keys when out and
    lse are those of the whole (ring attention). With sinks also dsinks =
    -sum over rows of exp(sink - lse) * D. float64."""
    groups = q.shape[2] // k.shape[2]
    mask = visible(q.shape[1], k.shape[1], causal, q.device, window)
    qt = q.double().transpose(1, 2)  # (b, h, sq, d)
    kt, vt = (t.double().repeat_interleave(groups, 2).transpose(1, 2) for t in (k, v))  # (b, h, sk, d)
    do, o = dout.double().transpose(1, 2), out.double().transpose(1, 2)
    stats = lse.double()[..., None]  # (b, h, sq, 1)
    finite = torch.isfinite(stats)
    scores = capped((qt @ kt.transpose(-1, -2)) * softmax_scale, softcap)
    probs = torch.exp(scores - torch.where(finite, stats, torch.zeros_like(stats)))
    probs = probs.masked_fill(~mask, 0.0) * finite
    delta = (do * o).sum(-1, keepdim=True)
    if dlse is not None:
        delta = delta - dlse.double()[..., None]
    ds = probs * (do @ vt.transpose(-1, -2) - delta)
    if softcap:
        ds = ds * (1 - (scores / softcap) ** 2)
    dq = (ds @ kt * softmax_scale).transpose(1, 2)
    dk_heads = ds.transpose(-1, -2) @ qt * softmax_scale  # (b, h, sk, d)
    dv_heads = probs.transpose(-1, -2) @ do
    dk, dv = (t.unflatten(1, (k.shape[2], groups)).sum(2).transpose(1, 2) for t in (dk_heads, dv_heads))
    if sinks is None:
        return dq, dk, dv
    sink_probs = torch.exp(sinks.double()[None, :, None, None] - stats) * finite
    return dq, dk, dv, -(sink_probs * delta).sum(dim=(0, 2, 3))


_cpu_kernels = {"on": False, "calls": []}


def _require_cpu_kernels(name):
    if not _cpu_kernels["on"]:
        raise NotImplementedError(f"dash_attn::{name} has no CPU kernel outside reference_attention.cpu_kernels()")
    _cpu_kernels["calls"].append(name)


def _dsinks_of(grads, sinks, sinks_grad, device):
    """What the backward ops return as their fourth tensor."""
    if sinks is not None and sinks_grad:
        return grads[3].float()
    return torch.empty((0,), dtype=torch.float32, device=device)


def _install(ops):
    if getattr(ops, "_reference_cpu_kernels", False):
        return

    @ops.fwd_varlen.register_kernel("cpu")
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
          causal, deterministic, schedule, sm_margin, window_left=-1, window_right=-1, softcap=0.0, sinks=None):
        _require_cpu_kernels("fwd_varlen")
        out, lse = reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, seqused_q, seqused_k,
                                    window=(window_left, window_right), softcap=softcap, sinks=sinks)
        return out.to(q.dtype), lse.float()

    @ops.bwd_varlen.register_kernel("cpu")
    def _(dout, dlse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
          max_seqlen_k, softmax_scale, causal, deterministic, schedule, sm_margin, window_left=-1, window_right=-1,
          softcap=0.0, sinks=None, sinks_grad=False):
        _require_cpu_kernels("bwd_varlen")
        grads = reference_varlen_grads(dout, dlse, q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal,
                                       seqused_q, seqused_k, (window_left, window_right), softcap, sinks)
        return tuple(g.to(t.dtype) for g, t in zip(grads, (q, k, v))) + (
            _dsinks_of(grads, sinks, sinks_grad, q.device),)

    @ops.fwd.register_kernel("cpu")
    def _(q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin, window_left=-1, window_right=-1,
          softcap=0.0, sinks=None):
        _require_cpu_kernels("fwd")
        pairs = [attend(q[b], k[b], v[b], softmax_scale, causal, window=(window_left, window_right), softcap=softcap,
                        sinks=sinks) for b in range(q.shape[0])]
        lse_dtype = torch.promote_types(torch.float32, q.dtype)  # float32 as the GPU's; float64 for float64 tests
        return (torch.stack([o for o, _ in pairs]).to(q.dtype),
                torch.stack([lse for _, lse in pairs]).to(lse_dtype))

    @ops.bwd.register_kernel("cpu")
    def _(dout, dlse, q, k, v, out, lse, softmax_scale, causal, deterministic, schedule, sm_margin, window_left=-1,
          window_right=-1, softcap=0.0, sinks=None, sinks_grad=False):
        _require_cpu_kernels("bwd")
        grads = reference_grads_from_stats(dout, dlse, q, k, v, out, lse, softmax_scale, causal,
                                           (window_left, window_right), softcap, sinks)
        return tuple(g.to(t.dtype).contiguous() for g, t in zip(grads, (q, k, v))) + (
            _dsinks_of(grads, sinks, sinks_grad, q.device),)

    ops._reference_cpu_kernels = True


def cpu_kernel_calls():
    """The op names the CPU kernels ran since cpu_kernels() was entered."""
    return list(_cpu_kernels["calls"])


@contextlib.contextmanager
def cpu_kernels(ops):
    """Within: dash_attn::fwd_varlen / bwd_varlen (and the fixed-length
    dash_attn::fwd / bwd) run on CPU tensors by the reference above; yields
    the list of op names called. (torch.library keeps a kernel once
    registered, so outside this block it refuses to run.)"""
    _install(ops)
    _cpu_kernels["on"], _cpu_kernels["calls"] = True, []
    try:
        yield _cpu_kernels["calls"]
    finally:
        _cpu_kernels["on"] = False
