"""Does each benchmarked implementation compute the attention it claims? One
(batch 0, head 0) slice of the shape's inputs is recomputed in fp64 and by a
naive same-precision implementation; an output or gradient passes when its
error is within FlashAttention-3's rule, 2x the naive error + 1e-3 (the rule of
tests/python and dash-bench). One head is O(seqlen^2) memory (a few GB in
fp64 at 16k), cheap enough to check every shape: a mis-wired layout or mask
shows up as 'verified: no', not as a fast wrong number."""
import torch


def _attention_with_grads(q, k, v, dout, causal, dtype):
    """softmax(q k^T / sqrt(d)) v and its gradients for one head, in dtype.
    Causal is FlashAttention's bottom-right alignment (equal to SDPA's top-left
    one for the square shapes benchmarked here)."""
    q, k, v = (t.to(dtype).requires_grad_() for t in (q, k, v))
    scores = (q @ k.transpose(0, 1)) * q.shape[-1] ** -0.5
    if causal:
        seqlen_q, seqlen_k = q.shape[0], k.shape[0]
        keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=q.device).tril(seqlen_k - seqlen_q)
        scores = scores.masked_fill(~keep, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    grads = torch.autograd.grad(out, (q, k, v), dout.to(dtype))
    return [t.detach() for t in (out, *grads)]


def _error(a, b):
    return (a.double() - b.double()).abs().max().item()


class ReferenceSlice:
    """The exact output and gradients of (batch 0, head 0) and the tolerance of
    each. Needs heads_q == heads_kv (under GQA a kv head's gradient sums over
    its query heads, which one slice does not see)."""

    def __init__(self, q, k, v, dout, causal):
        if q.shape[2] != k.shape[2]:
            raise ValueError("ReferenceSlice: needs as many kv heads as q heads")
        self.slice = lambda t: t[0, :, 0, :]
        inputs = [self.slice(t).detach() for t in (q, k, v, dout)]
        self.exact = _attention_with_grads(*inputs, causal, torch.float64)
        naive = _attention_with_grads(*inputs, causal, q.dtype)
        self.tolerance = [2 * _error(n, e) + 1e-3 for n, e in zip(naive, self.exact)]

    def check(self, tensors, first=0):
        """(max error, max error / tolerance) of tensors [out] (first=0) or
        [dq, dk, dv] (first=1), each in (batch, seqlen, heads, head_dim). A
        ratio <= 1 passes FA3's rule; a wrongly wired layout or mask gives
        ratios far above 1 (NaN compares as failing)."""
        errors = [_error(self.slice(t), self.exact[first + i]) for i, t in enumerate(tensors)]
        ratios = [e / self.tolerance[first + i] for i, e in enumerate(errors)]
        worst = float("nan") if any(r != r for r in ratios) else max(ratios)
        return max(errors), worst
