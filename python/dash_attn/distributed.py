"""Deterministic context parallelism: ring attention over a torch.distributed
process group, the sequence sharded across ranks, on dash_attn's kernels
(dash_attn::fwd / dash_attn::bwd, the ops flash_attn_func runs).

Layout. With causal=True the sequence is split into 2R chunks of equal length
and rank r holds chunks r and 2R-1-r, concatenated (the zigzag split: every
rank then does the same work at every ring step). zigzag_shard() and
zigzag_unshard() convert. With causal=False any split works (each query row
sees every key); the zigzag split is accepted as well.

Ring. K and V travel rank r -> r+1; at step t rank r holds the K/V of rank
(r - t) mod R. The transfer for step t+1 is posted (batch_isend_irecv) before
the kernels of step t run, so it overlaps them. The backward sends K/V around
again, together with an fp32 dK/dV accumulator that travels with its K/V and
arrives back at its owner after R hops.

Determinism. Every reduction has an order fixed by (rank, world size, step)
and never by arrival: the forward merges the partial (out, lse) of step
0, 1, ..., R-1 in that order (a step's data is waited for before it is used);
the backward accumulates dQ over the steps in the same order, and the dK/dV of
rank s is summed in the order of the ranks it visits, s, s+1, ..., s-1. With
deterministic=True every kernel call is bitwise reproducible, so the result
and the gradients are bitwise identical over reruns at a fixed world size,
whatever the communication timing. They are not identical across world sizes
(the partial softmaxes are merged, and partial gradients added, in a different
grouping), nor to a single-GPU flash_attn_func.

This is a torch.autograd.Function with an explicit backward: the kernels'
backward, given the merged out and lse, gives each K/V chunk's exact share of
the gradient (P = exp(S - lse) is already the global softmax), so the backward
needs no merge of its own, only the fixed-order sums above."""

import math

import torch
import torch.distributed as dist

from . import _library, ops
from ._checks import check_qkv, check_sm_margin, resolve_deterministic

FUNCTION = "ring_flash_attn_func"


# ----------------------------------------------------------------------------- layout


def zigzag_shard(x, rank, world_size, dim=1):
    """Rank `rank`'s shard of the full-sequence tensor x: chunks rank and
    2*world_size-1-rank of 2*world_size along dim, concatenated (a copy)."""
    chunks = x.chunk(2 * world_size, dim=dim)
    if len(chunks) != 2 * world_size or x.shape[dim] % (2 * world_size):
        raise ValueError(f"dash_attn.zigzag_shard: a length of {x.shape[dim]} along dim {dim} does not split into "
                         f"{2 * world_size} equal chunks")
    return torch.cat([chunks[rank], chunks[2 * world_size - 1 - rank]], dim=dim)


def zigzag_unshard(shards, dim=1):
    """The full-sequence tensor from every rank's zigzag shard, in rank order."""
    world_size = len(shards)
    halves = [s.chunk(2, dim=dim) for s in shards]
    return torch.cat([halves[r][0] for r in range(world_size)] +
                     [halves[r][1] for r in reversed(range(world_size))], dim=dim)


# ----------------------------------------------------------------------------- merge


def merge_into(out_acc, lse_acc, out, lse):
    """Adds the partial (out, lse) of further keys to the accumulator (out_acc
    (batch, seqlen, heads, d), lse_acc (batch, heads, seqlen)), in place:
    lse' = log(e^lse_acc + e^lse), out' = out_acc e^(lse_acc - lse') + out e^(lse - lse').
    Rows whose lse is -inf (no key so far) take weight 0. Not commutative in
    floating point: callers fix the order."""
    lse = lse.to(lse_acc.dtype)
    new = torch.logaddexp(lse_acc, lse)
    finite = torch.isfinite(new)
    safe = torch.where(finite, new, torch.zeros_like(new))
    w_acc = torch.where(finite, torch.exp(lse_acc - safe), torch.zeros_like(new))
    w_new = torch.where(finite, torch.exp(lse - safe), torch.zeros_like(new))
    # (batch, heads, seqlen) -> (batch, seqlen, heads, 1)
    out_acc.mul_(w_acc.transpose(1, 2)[..., None]).add_(out.to(out_acc.dtype) * w_new.transpose(1, 2)[..., None])
    lse_acc.copy_(new)


def merge_partials(partials, dtype=None):
    """[(out, lse), ...] of disjoint key sets, merged left to right (the list's
    order is the merge order): (out, lse) of attention over all their keys,
    out at dtype (default: float32, or float64 for float64 inputs)."""
    out0, lse0 = partials[0]
    dtype = dtype or torch.promote_types(torch.float32, out0.dtype)
    out_acc = torch.zeros(out0.shape, dtype=dtype, device=out0.device)
    lse_acc = torch.full(lse0.shape, float("-inf"), dtype=dtype, device=out0.device)
    for out, lse in partials:
        merge_into(out_acc, lse_acc, out, lse)
    return out_acc, lse_acc


# ----------------------------------------------------------------------------- ring


class _Ring:
    """Point-to-point neighbours of one rank in the group (global ranks for P2POp)."""

    def __init__(self, group):
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        to_global = (lambda r: dist.get_global_rank(group, r)) if group is not None else (lambda r: r)
        self.next = to_global((self.rank + 1) % self.size)
        self.prev = to_global((self.rank - 1) % self.size)

    def shift(self, send):
        """Posts send -> next rank and a receive of the same shape from the
        previous one; returns (received buffer, works to wait on)."""
        recv = torch.empty_like(send)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, self.next, self.group),
                                        dist.P2POp(dist.irecv, recv, self.prev, self.group)])
        return recv, works

    def source(self, step):
        return (self.rank - step) % self.size


def _wait(works):
    for w in works:
        w.wait()


def _blocks(rank, source, causal, seqlen):
    """The one kernel call of a ring step: (q rows, k rows, causal) as slices of
    the local sequence (q) and of the source's (k). Zigzag: rank r's chunks are
    a = r and b = 2R-1-r; for source s < r both local chunks see chunk s only
    (the first half of its K/V), for s > r only chunk b sees both of s's chunks,
    for s = r the local sequence against itself is causal."""
    everything = slice(0, seqlen)
    if not causal or source == rank:
        return everything, everything, causal
    half = seqlen // 2
    if source < rank:
        return everything, slice(0, half), False
    return slice(half, seqlen), everything, False


class _RingAttention(torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, v, group, scale, causal, deterministic, schedule, sm_margin):
        ring = _Ring(group)
        seqlen = q.shape[1]
        acc = torch.promote_types(torch.float32, q.dtype)
        out_acc = torch.zeros(q.shape, dtype=acc, device=q.device)
        lse_acc = torch.full((q.shape[0], q.shape[2], seqlen), float("-inf"), dtype=acc, device=q.device)
        kv = torch.stack([k, v])
        for step in range(ring.size):
            if step + 1 < ring.size:
                kv_next, works = ring.shift(kv)  # overlaps this step's kernel
            rows, cols, block_causal = _blocks(ring.rank, ring.source(step), causal, seqlen)
            out, lse = ops.fwd(q[:, rows], kv[0][:, cols], kv[1][:, cols], scale, block_causal, deterministic,
                               schedule, sm_margin)
            merge_into(out_acc[:, rows], lse_acc[:, :, rows], out, lse)
            if step + 1 < ring.size:
                _wait(works)
                kv = kv_next
        out = out_acc.to(q.dtype)
        lse = lse_acc.to(torch.float32) if q.dtype != torch.float64 else lse_acc
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.settings = (group, scale, causal, deterministic, schedule, sm_margin)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        group, scale, causal, deterministic, schedule, sm_margin = ctx.settings
        if dout is None:  # only lse was used
            dout = torch.zeros_like(out)
        ring = _Ring(group)
        seqlen = q.shape[1]
        acc = torch.promote_types(torch.float32, q.dtype)
        dq = torch.zeros(q.shape, dtype=acc, device=q.device)
        dkv = None  # the accumulator of the K/V held now, from the previous rank
        kv = torch.stack([k, v])
        for step in range(ring.size):
            if step + 1 < ring.size:
                kv_next, kv_works = ring.shift(kv)
            rows, cols, block_causal = _blocks(ring.rank, ring.source(step), causal, seqlen)
            part_dq, part_dk, part_dv, _ = ops.bwd(
                dout[:, rows].contiguous(), dlse[:, :, rows].contiguous() if dlse is not None else None,
                q[:, rows].contiguous(), kv[0][:, cols].contiguous(), kv[1][:, cols].contiguous(),
                out[:, rows].contiguous(), lse[:, :, rows].contiguous(), scale, block_causal, deterministic,
                schedule, sm_margin)
            dq[:, rows] += part_dq
            if dkv is None:
                dkv = torch.zeros(kv.shape, dtype=acc, device=q.device)
            else:
                _wait(dkv_works)
            dkv[0][:, cols] += part_dk
            dkv[1][:, cols] += part_dv
            if ring.size > 1:
                dkv, dkv_works = ring.shift(dkv)  # on to the next rank; the last hop brings ours home
            if step + 1 < ring.size:
                _wait(kv_works)
                kv = kv_next
        if ring.size > 1:
            _wait(dkv_works)
        return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype), None, None, None, None, None, None


def ring_flash_attn_func(q, k, v, group=None, softmax_scale=None, causal=False, deterministic=True, schedule="auto",
                         sm_margin=0, return_lse=False):
    """Attention over a sequence sharded across the ranks of `group` (default:
    the world): q (batch, seqlen_local, heads_q, head_dim), k and v (batch,
    seqlen_local, heads_kv, head_dim), this rank's shard, in the zigzag layout
    (zigzag_shard) when causal (seqlen_local even); every rank passes the same
    shapes. Returns this rank's rows of out; (out, lse) with return_lse=True,
    lse (batch, heads_q, seqlen_local) float32. Differentiable in q, k, v
    (gradients of out and lse). deterministic, schedule and sm_margin (SMs left
    to NCCL's kernels) go to every kernel call; with deterministic=True the
    bits are identical over reruns at a fixed world size."""
    check_qkv(FUNCTION, q, k, v, _library.compiled_head_dims)
    check_sm_margin(FUNCTION, sm_margin)
    deterministic, schedule = resolve_deterministic(FUNCTION, deterministic, schedule,
                                                    torch.are_deterministic_algorithms_enabled())
    if k.shape[1] != q.shape[1]:
        raise ValueError(f"dash_attn.{FUNCTION}: argument 'k': expected seqlen {q.shape[1]} like q (one shard "
                         f"of the same sequence), got shape {tuple(k.shape)}")
    if causal and q.shape[1] % 2:
        raise ValueError(f"dash_attn.{FUNCTION}: causal needs the zigzag layout (two equal chunks per rank), "
                         f"got an odd local seqlen {q.shape[1]}")
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out, lse = _RingAttention.apply(q, k, v, group, float(scale), bool(causal), bool(deterministic), schedule,
                                    int(sm_margin))
    return (out, lse) if return_lse else out
