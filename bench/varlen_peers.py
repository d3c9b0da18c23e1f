"""Issue 17's mixed-length bar: a packed batch of documents drawn from a
long-tailed length distribution (lognormal, clipped to 64..8k, fixed seed)
until --tokens tokens, GQA 32/8 heads, bf16; dash_attn's varlen forward and
backward (deterministic 'auto' and atomic) beside FlashAttention-4's
flash_attn_varlen_func (deterministic and not) when it imports, all in one
process on the same inputs. Backward = autograd.grad on a retained graph.
Deterministic rows are rerun and compared bitwise. Medians of
cuda_timing.time_calls; prints a table and writes --json.
  python3 bench/varlen_peers.py --json out.json [--reps 20] [--hdims 128]"""
import argparse
import json
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_timing  # noqa: E402
import dash_attn  # noqa: E402


def document_lengths(tokens, seed, low=64, high=8192):
    """Lognormal lengths (median 600) clipped to [low, high], the last one cut to fill `tokens`."""
    rng = random.Random(seed)
    lengths = []
    while sum(lengths) < tokens:
        lengths.append(int(min(high, max(low, rng.lognormvariate(math.log(600), 1.0)))))
    lengths[-1] -= sum(lengths) - tokens
    if lengths[-1] < 1:
        lengths.pop()
    return lengths


def attention_flops(lengths, heads, head_dim, causal):
    total = sum(4 * n * n * heads * head_dim for n in lengths)
    return total / 2 if causal else total


def implementations():
    """name -> (deterministic, varlen function taking (q, k, v, cu, max, causal))."""
    impls = {
        "dash_attn det.": (True, lambda q, k, v, cu, m, causal: dash_attn.flash_attn_varlen_func(
            q, k, v, cu, cu, m, m, causal=causal, deterministic=True)),
        "dash_attn atomic": (False, lambda q, k, v, cu, m, causal: dash_attn.flash_attn_varlen_func(
            q, k, v, cu, cu, m, m, causal=causal, deterministic=False)),
    }
    try:
        from flash_attn.cute import flash_attn_varlen_func as fa4_varlen
    except Exception as error:  # noqa: BLE001 - any import failure means "not available"
        print(f"FA4 unavailable: {type(error).__name__}: {error}", flush=True)
        return impls

    def fa4(deterministic):
        def call(q, k, v, cu, m, causal):
            out = fa4_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m,
                             causal=causal, deterministic=deterministic)
            return out[0] if isinstance(out, tuple) else out
        return call
    impls["FA4"] = (False, fa4(False))
    impls["FA4 det."] = (True, fa4(True))
    return impls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--hdims", default="128")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    heads_q, heads_kv = 32, 8
    lengths = document_lengths(args.tokens, args.seed)
    total = sum(lengths)
    print(f"{len(lengths)} documents, {total} tokens, longest {max(lengths)}", flush=True)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), device="cuda", dtype=torch.int32)
    rows = []
    impls = implementations()
    for head_dim in (int(h) for h in args.hdims.split(",")):
        for causal in (True, False):
            torch.manual_seed(0)
            q = torch.randn(total, heads_q, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(total, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(total, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            dout = torch.randn(total, heads_q, head_dim, device="cuda", dtype=torch.bfloat16)
            flops = attention_flops(lengths, heads_q, head_dim, causal)
            for name, (deterministic, fn) in impls.items():
                row = dict(impl=name, hdim=head_dim, causal=causal, documents=len(lengths), tokens=total,
                           longest=max(lengths), heads_q=heads_q, heads_kv=heads_kv)
                try:
                    call = lambda: fn(q, k, v, cu, max(lengths), causal)  # noqa: E731
                    with torch.no_grad():
                        forward = cuda_timing.time_calls(call, args.reps)
                    out = call()
                    grad = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                    backward = cuda_timing.time_calls(grad, args.reps)
                    row.update(fwd_ms=forward["median_ms"], bwd_ms=backward["median_ms"],
                               fwd_tflops=flops / (forward["median_ms"] * 1e-3) / 1e12,
                               bwd_tflops=2.5 * flops / (backward["median_ms"] * 1e-3) / 1e12)
                    if deterministic:
                        first = grad()
                        row["bitwise_reruns"] = all(
                            all(torch.equal(a, b) for a, b in zip(first, grad())) for _ in range(3))
                    del out
                except Exception as error:  # noqa: BLE001 - a peer's failure is a row, not the end
                    row["error"] = f"{type(error).__name__}: {error}"[:300]
                rows.append(row)
                text = row.get("error") or (f"fwd {row['fwd_tflops']:6.1f} bwd {row['bwd_tflops']:6.1f} TFLOPS"
                                            + (f" reruns bitwise {row['bitwise_reruns']}" if deterministic else ""))
                print(f"hdim {head_dim} {'causal' if causal else 'full':>6} {name:>16}: {text}", flush=True)
    with open(args.json, "w") as f:
        json.dump(dict(commit=args.commit, device=torch.cuda.get_device_name(), lengths=lengths, rows=rows), f,
                  indent=1)


if __name__ == "__main__":
    main()
