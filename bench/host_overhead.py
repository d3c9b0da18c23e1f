"""Host time per attention call on a tiny shape: what a call costs the CPU
before its kernels run (Python checks, dispatch, autograd, the library's
launch setup), for a forward without autograd and for a forward + backward
(autograd.grad), beside the peers. Issue 16's target for dash_attn: <= 40 us
for the forward and <= 150 us for forward + backward, measured beside FA4.

Method: per sample, the GPU first spins (torch.cuda._sleep) long enough for
all of the sample's calls, so that no call waits for the device; the host
clock then times --calls back-to-back calls, and the sample is their mean.
A sample whose spin ended before the last call was issued is flagged
(spin_too_short in the row): its calls may have waited for the GPU. The
median, min and max over --samples samples are reported. Kernel times are
not part of the number (bench/peers.py measures those).

    python3 bench/host_overhead.py [--impls dash_attn:det,fa4:det] [--calls 48] [--samples 15]
                                   [--shape 1,128,4,64] [--json FILE] [--csv FILE] [--commit SHA]
--device cpu runs the script's logic with CPU tensors (no spin; the times mean nothing).
"""
import argparse
import statistics
import sys
import time

import torch

import attention_impls
import peer_rows
from cuda_timing import SPIN_CYCLES, synchronize
from result_files import add_output_arguments, save
from run_environment import describe, environment

DEFAULT_IMPLS = "dash_attn,fa4"
FIELDS = ("impl", "label", "deterministic", "pass", "host_us", "min_us", "max_us", "calls", "samples",
          "spin_too_short", "status", "batch", "seqlen", "heads", "head_dim")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--impls", default=DEFAULT_IMPLS,
                        help="comma-separated NAME, NAME:det or NAME:nondet (names as in bench/peers.py)")
    parser.add_argument("--calls", type=int, default=48, help="back-to-back calls per sample")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (kernels compiled, plans built)")
    parser.add_argument("--shape", default="1,128,4,64", help="batch,seqlen,heads,head_dim (q, k and v alike)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.variants = peer_rows.parse_variants(args.impls, DEFAULT_IMPLS.split(","))
        args.batch, args.seqlen, args.heads, args.head_dim = (int(x) for x in args.shape.split(","))
    except ValueError as error:
        parser.error(str(error))
    if args.calls < 1 or args.samples < 1:
        parser.error("--calls and --samples must be positive")
    return args


def sample_host_us(call, calls, device):
    """Mean host microseconds of `calls` calls, and whether the GPU ran dry
    (its spin finished) before the last call was issued."""
    on_cuda = torch.device(device).type == "cuda"
    synchronize(device)
    if on_cuda:
        # cuda_timing's spin (1-2 ms, longer than one call's host time) per call.
        torch.cuda._sleep(calls * SPIN_CYCLES)
        spin_done = torch.cuda.Event()
        spin_done.record()
    began = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - began
    ran_dry = on_cuda and spin_done.query()
    synchronize(device)
    return elapsed / calls * 1e6, ran_dry


def calls_for(impl, deterministic, args):
    """{pass: call} for one implementation and mode: 'fwd' without autograd,
    'fwd+bwd' a forward and autograd.grad of q, k, v."""
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    shape = (args.batch, args.seqlen, args.heads, args.head_dim)
    q, k, v, dout = (torch.randn(shape, device=args.device, dtype=dtype) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    attn = impl.function(False, deterministic)

    def forward():
        with torch.no_grad():
            attn(q, k, v)

    def forward_backward():
        out = attention_impls.first_output(attn(q, k, v))
        torch.autograd.grad(out, (q, k, v), dout)
    return {"fwd": forward, "fwd+bwd": forward_backward}


def measure(name, impl, deterministic, args):
    rows = []
    base = dict(impl=name, label=peer_rows.label(name, deterministic), deterministic=deterministic,
                calls=args.calls, samples=args.samples, batch=args.batch, seqlen=args.seqlen, heads=args.heads,
                head_dim=args.head_dim)
    if getattr(impl, "protocol", "autograd") != "autograd":
        return [dict(base, **{"pass": p, "status": "unsupported: no autograd function (direct ops only)"})
                for p in ("fwd", "fwd+bwd")]
    with impl.mode(deterministic):
        for pass_, call in calls_for(impl, deterministic, args).items():
            row = dict(base, **{"pass": pass_})
            try:
                for _ in range(max(args.warmup, getattr(impl, "min_warmup", 0))):
                    call()
                samples = [sample_host_us(call, args.calls, args.device) for _ in range(args.samples)]
            except Exception as error:  # a peer that cannot run this shape or mode: recorded, not fatal
                row["status"] = peer_rows.status_from_error(type(error).__name__, str(error))
            else:
                times = [t for t, _ in samples]
                row.update(host_us=round(statistics.median(times), 1), min_us=round(min(times), 1),
                           max_us=round(max(times), 1), spin_too_short=sum(dry for _, dry in samples), status="ok")
            rows.append(row)
            print(f"{row['label']:24} {pass_:8} " + (f"{row['host_us']:8.1f} us  (min {row['min_us']:.1f}, max "
                  f"{row['max_us']:.1f}; GPU ran dry in {row['spin_too_short']} of {args.samples})"
                  if row["status"] == "ok" else row["status"]), flush=True)
    return rows


def main(argv=None):
    args = parse_args(argv)
    implementations, skipped, variants = attention_impls.available(args.variants)
    document = environment(args.device, args.commit)
    document.update(shape=dict(batch=args.batch, seqlen=args.seqlen, heads=args.heads, head_dim=args.head_dim),
                    calls=args.calls, samples=args.samples, warmup=args.warmup, skipped=skipped, rows=[],
                    method="host clock around back-to-back calls while the GPU spins; mean per call per sample; "
                           "median/min/max over samples; fwd without autograd, fwd+bwd = forward + autograd.grad")
    print(describe(document), flush=True)
    torch.manual_seed(0)
    for name, deterministic in variants:
        document["rows"] += measure(name, implementations[name], deterministic, args)
        save(document, args.json, args.csv, FIELDS)
    failures = [f"{r['label']} {r['pass']}: {r['status']}" for r in document["rows"]
                if r["impl"] == peer_rows.DASH and r["status"] != "ok"]
    return peer_rows.exit_status(failures, skipped)


if __name__ == "__main__":
    sys.exit(main())
