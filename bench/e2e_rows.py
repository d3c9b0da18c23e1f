"""Rows of the end-to-end block benchmark, without torch: FLOP counts, each
implementation's time relative to SDPA and to dash_attn's atomic mode, and
attention's share of the step. Written by bench/e2e_block.py, read by
bench/make_e2e_table.py, tested on the CPU."""
from peer_rows import DASH

E2E_DEFAULT = ("dash_attn:det", "dash_attn:nondet", "sdpa_default", "sdpa_cudnn:nondet", "sdpa_flash:nondet",
               "sdpa_flash:det")
SDPA = ("sdpa_default", False)   # the "vs SDPA" baseline: SDPA with its own backend choice
ATOMIC = (DASH, False)           # dash_attn's non-deterministic (atomic dQ) backward

E2E_FIELDS = ("impl", "label", "deterministic", "batch", "seqlen", "status", "sdpa_backend",
              "step_median_ms", "step_min_ms", "step_max_ms", "step_tflops",
              "attn_median_ms", "attn_min_ms", "attn_max_ms", "attn_tflops", "attn_share",
              "step_time_vs_sdpa", "attn_time_vs_sdpa", "step_time_vs_dash_atomic", "attn_time_vs_dash_atomic",
              "out_max_diff_vs_sdpa", "bitwise", "max_abs_diff", "attn_bitwise", "step_warmup_s",
              "step_host_bound_reps", "attn_host_bound_reps", "notes")


def block_flops(matmul_params, batch, seqlen, heads, head_dim, causal=True):
    """FLOPs of one block's forward + backward: every weight's matrix product
    counts 2 per token forward and 4 backward (input and weight gradients);
    attention counts 4*b*h*s^2*d forward (half for causal) and 2.5x that
    backward. Norms, RoPE and activations are not counted."""
    matmuls = 2 * batch * seqlen * matmul_params
    attention = 4 * batch * heads * seqlen * seqlen * head_dim / (2 if causal else 1)
    return dict(step=3 * matmuls + 3.5 * attention, attention=3.5 * attention)


def _ratio(row, base, field):
    if base is None or not is_step_ok(row) or not is_step_ok(base):
        return None
    return row[field] / base[field] if row.get(field) and base.get(field) else None


def is_step_ok(row):
    return (row.get("status") or "ok") == "ok" and row.get("step_median_ms") is not None


def annotate(rows):
    """Adds attention's share of the step and the time ratios (this row's
    median / the baseline's median: below 1 is faster) per (batch, seqlen)."""
    groups = {}
    for row in rows:
        groups.setdefault((row["batch"], row["seqlen"]), []).append(row)
    for group in groups.values():
        find = lambda key: next((r for r in group if (r["impl"], r["deterministic"]) == key and is_step_ok(r)),
                                None)  # noqa: E731
        sdpa, atomic = find(SDPA), find(ATOMIC)
        for row in group:
            ok = is_step_ok(row)
            row["attn_share"] = row["attn_median_ms"] / row["step_median_ms"] \
                if ok and row.get("attn_median_ms") else None
            for name, base in (("sdpa", sdpa), ("dash_atomic", atomic)):
                row[f"step_time_vs_{name}"] = _ratio(row, base, "step_median_ms")
                row[f"attn_time_vs_{name}"] = _ratio(row, base, "attn_median_ms")
    return rows
