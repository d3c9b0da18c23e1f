"""PyTorch SDPA backends on the standard grid (docs/benchmarks.md), timed the
way dash-bench times dash_attn: CUDA events, warm-up, median of N repetitions,
fresh normal inputs. Backward is timed as a user pays it (all its kernels).

    python3 bench/sdpa_peers.py [--quick] [--reps 30] [--json peers.json]
"""
import argparse
import json
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

BACKENDS = {
    "sdpa_flash": SDPBackend.FLASH_ATTENTION,
    "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def time_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples), min(samples), max(samples)


def measure(backend, deterministic, head_dim, causal, seqlen, reps, total_tokens=16384, hidden=2048):
    batch, heads = total_tokens // seqlen, hidden // head_dim
    shape = (batch, heads, seqlen, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    flops = 4 * batch * heads * seqlen * seqlen * head_dim / (2 if causal else 1)
    torch.use_deterministic_algorithms(deterministic, warn_only=False)
    try:
        with sdpa_kernel(BACKENDS[backend]):
            fwd = lambda: scaled_dot_product_attention(q, k, v, is_causal=causal)
            fwd_ms = time_ms(fwd, reps)
            out = fwd()
            bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            bwd_ms = time_ms(bwd, reps)
    finally:
        torch.use_deterministic_algorithms(False)
    rows = []
    for name, (median, low, high), count in (("fwd", fwd_ms, flops), ("bwd", bwd_ms, 2.5 * flops)):
        rows.append(dict(impl=backend, pass_=name, deterministic=deterministic, head_dim=head_dim,
                         mask="causal" if causal else "full", seqlen=seqlen, median_ms=median, min_ms=low,
                         max_ms=high, tflops=count / (median * 1e9)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="hdim 128, seqlen 1k and 4k only")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    head_dims = [128] if args.quick else [64, 128]
    seqlens = [1024, 4096] if args.quick else [512, 1024, 2048, 4096, 8192, 16384]
    rows = []
    for head_dim in head_dims:
        for causal in (False, True):
            for seqlen in seqlens:
                for backend in BACKENDS:
                    for deterministic in ((False, True) if backend == "sdpa_flash" else (False,)):
                        try:
                            rows += measure(backend, deterministic, head_dim, causal, seqlen, args.reps)
                        except RuntimeError as error:  # a backend that refuses the shape or mode
                            rows.append(dict(impl=backend, pass_="-", deterministic=deterministic, head_dim=head_dim,
                                             mask="causal" if causal else "full", seqlen=seqlen,
                                             error=str(error).splitlines()[0]))
    print(f"{'impl':15} {'det':4} {'pass':4} {'hdim':4} {'mask':6} {'seqlen':>6} {'ms':>8} {'TFLOPS':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['impl']:15} {str(r['deterministic'])[0]:4} {'-':4} {r['head_dim']:4} {r['mask']:6} {r['seqlen']:6} error: {r['error'][:60]}")
        else:
            print(f"{r['impl']:15} {str(r['deterministic'])[0]:4} {r['pass_']:4} {r['head_dim']:4} {r['mask']:6} "
                  f"{r['seqlen']:6} {r['median_ms']:8.3f} {r['tflops']:7.1f}")
    if args.json:
        device = torch.cuda.get_device_name()
        with open(args.json, "w") as out:
            json.dump(dict(device=device, torch=torch.__version__, rows=rows), out, indent=1)


if __name__ == "__main__":
    main()
