"""Issue 17's performance bar for the varlen forward: at equal total tokens, a
varlen batch whose sequences all have one length runs within 3% of the
fixed-length kernel. Times dash_attn.flash_attn_func on (batch, seqlen) and
flash_attn_varlen_func on the same tokens packed (cu_seqlens every seqlen),
plus one ragged batch (one long sequence among short ones) for the record;
both under no_grad (the varlen backward is not implemented yet). Medians of
cuda_timing.time_calls; prints a table and writes --json.
  python3 bench/varlen_vs_fixed.py --json out.json [--reps 30]"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_timing  # noqa: E402
import dash_attn  # noqa: E402


def forward_flops(lengths, heads, head_dim, causal):
    total = sum(4 * n * n * heads * head_dim for n in lengths)
    return total / 2 if causal else total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    rows = []
    heads_q, heads_kv = 32, 8
    for head_dim in (64, 128, 256):
        for causal in (False, True):
            for seqlen in (512, 2048, 8192):
                batch = args.tokens // seqlen
                shapes = [("fixed", [seqlen] * batch), ("varlen", [seqlen] * batch)]
                if seqlen == 8192:
                    shapes.append(("varlen ragged", [seqlen] + [256] * ((args.tokens - seqlen) // 256)))
                for kind, lengths in shapes:
                    total = sum(lengths)
                    q = torch.randn(total, heads_q, head_dim, device="cuda", dtype=torch.bfloat16)
                    k = torch.randn(total, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16)
                    v = torch.randn_like(k)
                    if kind == "fixed":
                        qb, kb, vb = (t.view(batch, seqlen, *t.shape[1:]) for t in (q, k, v))
                        call = lambda: dash_attn.flash_attn_func(qb, kb, vb, causal=causal)  # noqa: E731
                    else:
                        cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), device="cuda",
                                          dtype=torch.int32)
                        call = lambda: dash_attn.flash_attn_varlen_func(  # noqa: E731
                            q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
                    with torch.no_grad():
                        timing = cuda_timing.time_calls(call, args.reps)
                    tflops = forward_flops(lengths, heads_q, head_dim, causal) / (timing["median_ms"] * 1e-3) / 1e12
                    rows.append(dict(kind=kind, hdim=head_dim, causal=causal, seqlen=seqlen, sequences=len(lengths),
                                     tokens=total, heads_q=heads_q, heads_kv=heads_kv, tflops=tflops, **timing))
                    fixed = next((r for r in rows if r["kind"] == "fixed" and r["hdim"] == head_dim and
                                  r["causal"] == causal and r["seqlen"] == seqlen), None)
                    ratio = tflops / fixed["tflops"] if fixed and kind == "varlen" else None
                    print(f"{kind:>14} hdim {head_dim:>3} {'causal' if causal else 'full':>6} seqlen {seqlen:>5} "
                          f"x{len(lengths):>3}: {timing['median_ms']:.3f} ms {tflops:6.1f} TFLOPS"
                          + (f"  varlen/fixed {ratio:.3f}" if ratio else ""), flush=True)
    with open(args.json, "w") as f:
        json.dump(dict(commit=args.commit, device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
