"""The fp64 check of bench/reference_check.py for GQA/MQA shapes (fewer kv
heads than q heads): batch 0, kv head 0 and its group of q heads (q heads
0 .. heads_q / heads_kv - 1), as dash-bench checks them. dK and dV of that kv
head are sums over the group's q heads, so one (batch, head) slice does not
see them; here each q head of the group is recomputed (one at a time: the
memory of one head, as ReferenceSlice) and its dK, dV contributions summed.
The tolerance is FA3's rule, 2x the error of a naive same-precision
implementation + 1e-3; the naive dK, dV sum the group's bf16 gradients in
fp32 (as the kernels accumulate) and round once."""
import torch

from reference_check import _attention_with_grads, _error


class GroupReferenceSlice:
    """ReferenceSlice's interface (check(tensors, first)) for any heads_q
    that heads_kv divides (heads_q == heads_kv: the group is one head)."""

    def __init__(self, q, k, v, dout, causal):
        heads_q, heads_kv = q.shape[2], k.shape[2]
        if heads_q % heads_kv:
            raise ValueError(f"GroupReferenceSlice: heads_kv ({heads_kv}) must divide heads_q ({heads_q})")
        self.group = heads_q // heads_kv
        key, value = k[0, :, 0, :].detach(), v[0, :, 0, :].detach()
        exact, naive = [[], [], [], []], [[], [], [], []]
        for head in range(self.group):
            inputs = (q[0, :, head, :].detach(), key, value, dout[0, :, head, :].detach())
            for results, dtype in ((exact, torch.float64), (naive, q.dtype)):
                for i, t in enumerate(_attention_with_grads(*inputs, causal, dtype)):
                    results[i].append(t)
        # out, dq: (group, seqlen, head_dim), one slice per q head; dk, dv: summed over the group.
        self.exact = [torch.stack(exact[0]), torch.stack(exact[1]), sum(exact[2]), sum(exact[3])]
        summed = [sum(t.float() for t in naive[i]).to(q.dtype) for i in (2, 3)]
        naive = [torch.stack(naive[0]), torch.stack(naive[1])] + summed
        self.tolerance = [2 * _error(n, e) + 1e-3 for n, e in zip(naive, self.exact)]

    def _slice(self, tensor, index):
        """Batch 0 of an (batch, seqlen, heads, head_dim) result: the group's q
        heads for out and dq, kv head 0 for dk and dv."""
        if index < 2:
            return tensor[0, :, :self.group, :].transpose(0, 1)
        return tensor[0, :, 0, :]

    def check(self, tensors, first=0):
        """(max error, max error / tolerance) of [out] (first=0) or
        [dq, dk, dv] (first=1); a ratio <= 1 passes FA3's rule (NaN fails)."""
        errors = [_error(self._slice(t, first + i), self.exact[first + i]) for i, t in enumerate(tensors)]
        ratios = [e / self.tolerance[first + i] for i, e in enumerate(errors)]
        worst = float("nan") if any(r != r for r in ratios) else max(ratios)
        return max(errors), worst
