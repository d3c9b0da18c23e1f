"""Plain torch attention for the Python tests: one sequence at a time, in
float64 (or another dtype, for the "naive" error bound), bottom-right causal;
a variable-length batch as each of its sequences alone; and CPU kernels for
the varlen custom ops (forward by that reference, backward by the closed-form
gradient) and the fixed-length ones (backward from the out and lse it is
given), so the autograd wiring of flash_attn_varlen_func and the
transformers integration run on a machine without a GPU. Not a test module."""
import contextlib
import math

import torch


def visible(seqlen_q, seqlen_k, causal, device):
    """Key j visible from row i: all, or bottom-right causal (j <= i + seqlen_k - seqlen_q)."""
    rows = torch.arange(seqlen_q, device=device)[:, None]
    cols = torch.arange(seqlen_k, device=device)[None, :]
    if not causal:
        return torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    return cols <= rows + seqlen_k - seqlen_q


def probabilities(q, k, scale, causal, dtype):
    """P (heads_q, seqlen_q, seqlen_k) of one sequence, 0 on rows without a key,
    the natural-log lse (heads_q, seqlen_q), -inf there, and the key mask."""
    groups = q.shape[1] // k.shape[1]
    qt = q.to(dtype).transpose(0, 1)
    kt = k.to(dtype).repeat_interleave(groups, 1).transpose(0, 1)
    mask = visible(q.shape[0], k.shape[0], causal, q.device)
    has_key = mask.any(dim=1)
    scores = (qt @ kt.transpose(-1, -2)) * scale
    # Rows without a key: finite stand-in scores, their P set to 0 below.
    scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~has_key[:, None], 0.0)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None]) * has_key[:, None]
    return probs, torch.where(has_key, lse, torch.full_like(lse, float("-inf"))), has_key


def attend(q, k, v, scale=None, causal=False, dtype=torch.float64):
    """One sequence: q (seqlen_q, heads_q, head_dim), k and v (seqlen_k,
    heads_kv, head_dim) -> out (seqlen_q, heads_q, head_dim) and lse (heads_q,
    seqlen_q) at dtype; rows without a key give out 0, lse -inf. Differentiable."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    groups = q.shape[1] // k.shape[1]
    if q.shape[0] == 0 or k.shape[0] == 0:  # zeros that stay in the autograd graph
        out = q.to(dtype) * 0 + 0 * (k.to(dtype).sum() + v.to(dtype).sum())
        return out, torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=dtype, device=q.device)
    probs, lse, _ = probabilities(q, k, scale, causal, dtype)
    vt = v.to(dtype).repeat_interleave(groups, 1).transpose(0, 1)
    return (probs @ vt).transpose(0, 1), lse


def spans(cu_seqlens, seqused=None):
    """[(start, used, slot)] per sequence: its first row, used rows and slot length."""
    cu = cu_seqlens.tolist()
    used = seqused.tolist() if seqused is not None else None
    return [(cu[b], min(used[b], cu[b + 1] - cu[b]) if used is not None else cu[b + 1] - cu[b], cu[b + 1] - cu[b])
            for b in range(len(cu) - 1)]


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=None, causal=False, seqused_q=None,
                     seqused_k=None, dtype=torch.float64):
    """A packed batch, each sequence run alone through attend(): out (total_q,
    heads_q, head_dim) and lse (heads_q, total_q) at dtype, differentiable;
    rows outside every sequence's used length give out 0, lse -inf.
    cu_seqlens_q must start at 0 and end at total_q (well-formed batches only)."""
    outs, lses = [], []
    for (sq, uq, slot_q), (sk, uk, _) in zip(spans(cu_seqlens_q, seqused_q), spans(cu_seqlens_k, seqused_k)):
        out, lse = attend(q[sq:sq + uq], k[sk:sk + uk], v[sk:sk + uk], softmax_scale, causal, dtype)
        pad = slot_q - uq
        outs.append(torch.cat([out, out.new_zeros((pad,) + tuple(out.shape[1:]))]))
        lses.append(torch.cat([lse, lse.new_full((lse.shape[0], pad), float("-inf"))], dim=1))
    return torch.cat(outs), torch.cat(lses, dim=1)


def reference_varlen_grads(dout, dlse, q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, seqused_q=None,
                           seqused_k=None):
    """dq, dk, dv of reference_varlen in closed form (float64, no autograd):
    dS = P * (dP - D + dlse), D = rowsum(dO * O); GQA sums the group's heads."""
    softmax_scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
    dq, dk, dv = (torch.zeros(t.shape, dtype=torch.float64, device=t.device) for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    for (sq, uq, _), (sk, uk, _) in zip(spans(cu_seqlens_q, seqused_q), spans(cu_seqlens_k, seqused_k)):
        if uq == 0 or uk == 0:
            continue
        qs, ks, vs = q[sq:sq + uq].double(), k[sk:sk + uk].double(), v[sk:sk + uk].double()
        probs, _, _ = probabilities(qs, ks, softmax_scale, causal, torch.float64)  # (h, sq, sk)
        kt, vt = (t.repeat_interleave(groups, 1).transpose(0, 1) for t in (ks, vs))  # (h, sk, d)
        do = dout[sq:sq + uq].double().transpose(0, 1)  # (h, sq, d)
        out = probs @ vt
        dp = do @ vt.transpose(-1, -2)
        delta = (do * out).sum(-1, keepdim=True)
        extra = dlse[:, sq:sq + uq].double()[..., None] if dlse is not None else 0.0
        ds = probs * (dp - delta + extra)
        dq[sq:sq + uq] = (ds @ kt * softmax_scale).transpose(0, 1)
        dk_heads = (ds.transpose(-1, -2) @ qs.transpose(0, 1) * softmax_scale)  # (h, sk, d)
        dv_heads = probs.transpose(-1, -2) @ do
        for target, heads in ((dk, dk_heads), (dv, dv_heads)):
            target[sk:sk + uk] = heads.unflatten(0, (k.shape[1], groups)).sum(1).transpose(0, 1)
    return dq, dk, dv


def reference_grads_from_stats(dout, dlse, q, k, v, out, lse, softmax_scale, causal):
    """dq, dk, dv of fixed-length attention (batch, seqlen, heads, head_dim)
    as the kernels compute them: from the out and lse they are given (P =
    exp(S - lse), D = rowsum(dO * out)), not recomputed from q, k, v. So a
    chunk of keys gets its share of the gradient of attention over more keys
    when out and lse are those of the whole (ring attention). float64."""
    groups = q.shape[2] // k.shape[2]
    mask = visible(q.shape[1], k.shape[1], causal, q.device)
    qt = q.double().transpose(1, 2)  # (b, h, sq, d)
    kt, vt = (t.double().repeat_interleave(groups, 2).transpose(1, 2) for t in (k, v))  # (b, h, sk, d)
    do, o = dout.double().transpose(1, 2), out.double().transpose(1, 2)
    stats = lse.double()[..., None]  # (b, h, sq, 1)
    scores = (qt @ kt.transpose(-1, -2)) * softmax_scale
    probs = torch.exp(scores - torch.where(torch.isfinite(stats), stats, torch.zeros_like(stats)))
    probs = probs.masked_fill(~mask, 0.0) * torch.isfinite(stats)
    delta = (do * o).sum(-1, keepdim=True)
    extra = dlse.double()[..., None] if dlse is not None else 0.0
    ds = probs * (do @ vt.transpose(-1, -2) - delta + extra)
    dq = (ds @ kt * softmax_scale).transpose(1, 2)
    dk_heads = ds.transpose(-1, -2) @ qt * softmax_scale  # (b, h, sk, d)
    dv_heads = probs.transpose(-1, -2) @ do
    dk, dv = (t.unflatten(1, (k.shape[2], groups)).sum(2).transpose(1, 2) for t in (dk_heads, dv_heads))
    return dq, dk, dv


_cpu_kernels = {"on": False, "calls": []}


def _require_cpu_kernels(name):
    if not _cpu_kernels["on"]:
        raise NotImplementedError(f"dash_attn::{name} has no CPU kernel outside reference_attention.cpu_kernels()")
    _cpu_kernels["calls"].append(name)


def _install(ops):
    if getattr(ops, "_reference_cpu_kernels", False):
        return

    @ops.fwd_varlen.register_kernel("cpu")
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
          causal, deterministic, schedule, sm_margin):
        _require_cpu_kernels("fwd_varlen")
        out, lse = reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, seqused_q, seqused_k)
        return out.to(q.dtype), lse.float()

    @ops.bwd_varlen.register_kernel("cpu")
    def _(dout, dlse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
          max_seqlen_k, softmax_scale, causal, deterministic, schedule, sm_margin):
        _require_cpu_kernels("bwd_varlen")
        grads = reference_varlen_grads(dout, dlse, q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal,
                                       seqused_q, seqused_k)
        return tuple(g.to(t.dtype) for g, t in zip(grads, (q, k, v)))

    @ops.fwd.register_kernel("cpu")
    def _(q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin):
        _require_cpu_kernels("fwd")
        pairs = [attend(q[b], k[b], v[b], softmax_scale, causal) for b in range(q.shape[0])]
        lse_dtype = torch.promote_types(torch.float32, q.dtype)  # float32 as the GPU's; float64 for float64 tests
        return (torch.stack([o for o, _ in pairs]).to(q.dtype),
                torch.stack([lse for _, lse in pairs]).to(lse_dtype))

    @ops.bwd.register_kernel("cpu")
    def _(dout, dlse, q, k, v, out, lse, softmax_scale, causal, deterministic, schedule, sm_margin):
        _require_cpu_kernels("bwd")
        grads = reference_grads_from_stats(dout, dlse, q, k, v, out, lse, softmax_scale, causal)
        return tuple(g.to(t.dtype).contiguous() for g, t in zip(grads, (q, k, v)))

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
