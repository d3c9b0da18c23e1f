"""Issue 17's performance bar for varlen: at equal total tokens, a varlen batch
whose sequences all have one length runs within 3% of the fixed-length
kernel, forward and deterministic backward. Times dash_attn.flash_attn_func on
(batch, seqlen) and flash_attn_varlen_func on the same tokens packed
(cu_seqlens every seqlen), plus one ragged batch (one long sequence among
short ones) for the record. The backward is autograd.grad on a retained graph
(deterministic, schedule auto). Medians of cuda_timing.time_calls; prints a
table and writes --json.
  python3 bench/varlen_vs_fixed.py --json out.json [--reps 30] [--passes fwd,bwd]
      [--hdims 64,128,256] [--seqlens 512,2048,8192]"""
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
    parser.add_argument("--passes", default="fwd,bwd")
    parser.add_argument("--hdims", default="64,128,256")
    parser.add_argument("--seqlens", default="512,2048,8192",
                        help="8192 adds the ragged batch (one 8k sequence among 256-token ones)")
    args = parser.parse_args()
    passes = args.passes.split(",")
    rows = []
    heads_q, heads_kv = 32, 8
    for head_dim in (int(h) for h in args.hdims.split(",")):
        for causal in (False, True):
            for seqlen in (int(n) for n in args.seqlens.split(",")):
                batch = args.tokens // seqlen
                shapes = [("fixed", [seqlen] * batch), ("varlen", [seqlen] * batch)]
                if seqlen == 8192:
                    shapes.append(("varlen ragged", [seqlen] + [256] * ((args.tokens - seqlen) // 256)))
                for kind, lengths in shapes:
                    total = sum(lengths)
                    q = torch.randn(total, heads_q, head_dim, device="cuda", dtype=torch.bfloat16)
                    k = torch.randn(total, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16)
                    v = torch.randn_like(k)
                    for t in (q, k, v):
                        t.requires_grad_("bwd" in passes)
                    if kind == "fixed":
                        qb, kb, vb = (t.view(batch, seqlen, *t.shape[1:]) for t in (q, k, v))
                        call = lambda: dash_attn.flash_attn_func(qb, kb, vb, causal=causal)  # noqa: E731
                    else:
                        cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), device="cuda",
                                          dtype=torch.int32)
                        call = lambda: dash_attn.flash_attn_varlen_func(  # noqa: E731
                            q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
                    for pass_name in passes:
                        if pass_name == "fwd":
                            with torch.no_grad():
                                timing = cuda_timing.time_calls(call, args.reps)
                            flops = forward_flops(lengths, heads_q, head_dim, causal)
                        else:
                            out = call()
                            dout = torch.randn_like(out)
                            timing = cuda_timing.time_calls(
                                lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), args.reps)
                            flops = 2.5 * forward_flops(lengths, heads_q, head_dim, causal)
                            del out
                        tflops = flops / (timing["median_ms"] * 1e-3) / 1e12
                        rows.append(dict(kind=kind, pass_name=pass_name, hdim=head_dim, causal=causal, seqlen=seqlen,
                                         sequences=len(lengths), tokens=total, heads_q=heads_q, heads_kv=heads_kv,
                                         tflops=tflops, **timing))
                        fixed = next((r for r in rows if r["kind"] == "fixed" and r["pass_name"] == pass_name and
                                      r["hdim"] == head_dim and r["causal"] == causal and r["seqlen"] == seqlen), None)
                        ratio = tflops / fixed["tflops"] if fixed and kind == "varlen" else None
                        print(f"{kind:>14} {pass_name} hdim {head_dim:>3} {'causal' if causal else 'full':>6} "
                              f"seqlen {seqlen:>5} x{len(lengths):>3}: {timing['median_ms']:.3f} ms {tflops:6.1f} TFLOPS"
                              + (f"  varlen/fixed {ratio:.3f}" if ratio else ""), flush=True)
    with open(args.json, "w") as f:
        json.dump(dict(commit=args.commit, device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
