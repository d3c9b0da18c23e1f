"""Attention implementations side by side on the standard grid
(docs/benchmarks.md), in one process, on the same inputs per shape: dash_attn
through its PyTorch package (deterministic and atomic backward), PyTorch SDPA's
flash, cuDNN and memory-efficient backends (default and deterministic mode),
FlexAttention under torch.compile, and FlashAttention-2/3 when importable.
Forward and backward TFLOPS (CUDA events, warm-up, median/min/max of --reps),
a bitwise rerun check of every backward, one (batch, head) slice checked
against fp64, and each row's ratio to the best peer. Rows print as they are
measured; --json/--csv are rewritten after every shape.

    python3 bench/peers.py [--quick] [--reps 20] [--impls dash_attn,sdpa_cudnn:nondet,...]
                           [--json FILE] [--csv FILE] [--commit SHA]
"""
import argparse
import gc
import sys
import time
import warnings

import torch

import attention_impls
import peer_rows
from cuda_timing import bitwise_diff, time_calls
from reference_check import ReferenceSlice
from result_files import add_output_arguments, save
from run_environment import describe, environment


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--quick", action="store_true", help="head_dim 128, seqlen 1k and 4k only")
    parser.add_argument("--hdims", type=ints, help="head dims (default 64,128)")
    parser.add_argument("--seqlens", type=ints, help="sequence lengths (default 512,...,16384)")
    parser.add_argument("--masks", default="full,causal", help="full, causal or full,causal")
    parser.add_argument("--total-tokens", type=int, default=16384, help="batch = total tokens / seqlen")
    parser.add_argument("--hidden", type=int, default=2048, help="heads = hidden / head_dim")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per pass (median, min, max)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before timing")
    parser.add_argument("--impls", default="", help="comma-separated NAME, NAME:det or NAME:nondet; names: "
                        + ", ".join(peer_rows.IMPL_MODES) + f" (default: {','.join(peer_rows.PEERS_DEFAULT)})")
    parser.add_argument("--flex-dynamic", action="store_true",
                        help="compile FlexAttention for dynamic shapes (fewer compilations, kernels not specialized "
                             "per shape; default: one static compilation per shape)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    args.hdims = args.hdims or ([128] if args.quick else [64, 128])
    args.seqlens = args.seqlens or ([1024, 4096] if args.quick else list(peer_rows.SEQLENS))
    args.masks = [m for m in args.masks.split(",") if m]
    if any(m not in ("full", "causal") for m in args.masks):
        parser.error("--masks takes full, causal or full,causal")
    try:
        args.variants = peer_rows.parse_variants(args.impls, peer_rows.PEERS_DEFAULT)
    except ValueError as error:
        parser.error(str(error))
    return args


def _print_row(row):
    verified = "-" if row.get("verified") is None else ("yes" if row["verified"] else f"NO {row['error_ratio']:.3g}x")
    bitwise = "-" if row.get("bitwise") is None else ("equal" if row["bitwise"] else "DIFFER")
    if peer_rows.is_ok(row):
        timing = f"{row['median_ms']:9.3f} {row['tflops']:7.1f} {verified:>8} {bitwise:>7}"
        if row.get("host_bound_reps"):
            timing += f"  (GPU idle before launch in {row['host_bound_reps']} reps)"
    else:
        timing = f"{'-':>9} {'-':>7} {'-':>8} {'-':>7}  {row['status'][:110]}"
    print(f"{row['label']:22} {row['pass']:4} {row['head_dim']:4} {row['mask']:6} {row['seqlen']:6} {timing}",
          flush=True)


def _print_summary(rows):
    for pass_ in peer_rows.PASSES:
        mine = [r for r in rows if r["pass"] == pass_ and r["impl"] == peer_rows.DASH and peer_rows.is_ok(r)]
        best = next((r["best_peer"] for r in mine if r.get("best_peer")), None)
        if mine and best:
            ratios = ", ".join(f"{r['label']} {r['ratio_to_best_peer']:.2f}x" for r in mine)
            print(f"   {pass_}: best peer {best}; {ratios}", flush=True)


def _verify(row, check):
    row["max_error"], row["error_ratio"] = check
    row["verified"] = row["error_ratio"] <= 1.0  # FA3's rule; NaN fails


def measure_variant(name, impl, deterministic, tensors, causal, reference, args, base):
    """The forward and backward rows of one implementation in one mode. An
    implementation that refuses the shape or mode, or fails, gives rows with
    that status instead of stopping the run."""
    q, k, v, dout = tensors
    rows = {p: dict(base, impl=name, label=peer_rows.label(name, deterministic), deterministic=deterministic,
                    schedule=("auto" if deterministic else "atomic") if name == peer_rows.DASH else None,
                    status=None, **{"pass": p})
            for p in peer_rows.PASSES}
    flops = {p: peer_rows.attention_flops(base["batch"], base["heads"], base["seqlen"], base["seqlen"],
                                          base["head_dim"], causal, p) for p in peer_rows.PASSES}

    def record(pass_, timing):
        rows[pass_].update(timing, tflops=peer_rows.tflops(flops[pass_], timing["median_ms"]), status="ok")
        _print_row(rows[pass_])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with impl.mode(deterministic):
                attn = impl.function(causal, deterministic)
                forward = lambda: attn(q, k, v)  # noqa: E731
                timing = time_calls(forward, args.reps, args.warmup, args.device)
                out = forward()
                _verify(rows["fwd"], reference.check([out]))
                record("fwd", timing)
                backward = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                timing = time_calls(backward, args.reps, args.warmup, args.device)
                # The determinism check: the same backward on the same inputs, twice.
                first, second = backward(), backward()
                row = rows["bwd"]
                _verify(row, reference.check(first, first=1))
                diffs = [bitwise_diff(a, b) for a, b in zip(first, second)]
                row["bitwise"] = all(equal for equal, _ in diffs)
                for tensor, (_, diff) in zip(("dq", "dk", "dv"), diffs):
                    row[f"max_abs_diff_{tensor}"] = diff
                record("bwd", timing)
        except Exception as error:  # noqa: BLE001: a refusal or failure is a result row
            messages = [str(w.message) for w in caught]
            status = peer_rows.status_from_error(type(error).__name__, str(error), messages)
            for row in rows.values():
                if row["status"] is None:
                    row["status"] = status
                    _print_row(row)
            if args.device != "cpu":
                torch.cuda.empty_cache()
        notes = [n for n in dict.fromkeys(peer_rows.warning_line(w.message) for w in caught) if n][:3]
    for row in rows.values():
        row["notes"] = "; ".join(n[:200] for n in notes) or None
    return list(rows.values())


def measure_shape(head_dim, causal, seqlen, implementations, args):
    batch, heads = args.total_tokens // seqlen, args.hidden // head_dim
    base = dict(head_dim=head_dim, mask="causal" if causal else "full", seqlen=seqlen, batch=batch, heads=heads)
    # Fresh normal inputs in FlashAttention's (batch, seqlen, heads, head_dim)
    # memory order, and the same values in (batch, heads, seqlen, head_dim)
    # order for SDPA and FlexAttention (their native one; an output gradient
    # in another order than the output can cost a copy or be refused).
    # Every implementation indexes them as (batch, seqlen, heads, head_dim).
    make = lambda: torch.randn(batch, seqlen, heads, head_dim, device=args.device, dtype=torch.bfloat16)  # noqa: E731
    q, k, v, dout = make(), make(), make(), make()
    layouts = {"bshd": (q, k, v, dout)}
    if any(implementations[name].layout == "bhsd" for name, _ in args.variants):
        layouts["bhsd"] = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v, dout))
    for tensors in layouts.values():
        for t in tensors[:3]:
            t.requires_grad_()
    reference = ReferenceSlice(q, k, v, dout, causal)
    rows = []
    for name, deterministic in args.variants:
        impl = implementations[name]
        rows += measure_variant(name, impl, deterministic, layouts[impl.layout], causal, reference, args, base)
    del q, k, v, dout, layouts, reference
    gc.collect()
    if args.device != "cpu":
        torch.cuda.empty_cache()
    return peer_rows.annotate_best_peer(rows)


def main(argv=None):
    args = parse_args(argv)
    attention_impls.Flex.dynamic = args.flex_dynamic
    implementations, skipped, args.variants = attention_impls.available(args.variants)
    document = environment(args.device, args.commit)
    document.update(dtype="bf16", total_tokens=args.total_tokens, hidden=args.hidden, repetitions=args.reps,
                    warmup=args.warmup, fill_uninitialized_memory=False, flex_dynamic=args.flex_dynamic,
                    skipped=skipped, rows=[],
                    method="CUDA events per call after warm-up and a GPU spin; median/min/max; fresh normal inputs "
                           "per shape; backward = autograd.grad (the whole backward), run twice more for the "
                           "bitwise check; (batch 0, head 0) checked against fp64 (FA3's rule)")
    print(describe(document), flush=True)
    print(f"{'implementation':22} {'pass':4} {'hdim':4} {'mask':6} {'seqlen':>6} {'ms':>9} {'TFLOPS':>7} "
          f"{'verified':>8} {'bitwise':>7}", flush=True)
    began = time.perf_counter()
    for head_dim in args.hdims:
        for mask in args.masks:
            for seqlen in args.seqlens:
                document["rows"] += measure_shape(head_dim, mask == "causal", seqlen, implementations, args)
                _print_summary([r for r in document["rows"] if (r["head_dim"], r["mask"], r["seqlen"]) ==
                                (head_dim, mask, seqlen)])
                document["elapsed_s"] = round(time.perf_counter() - began, 1)
                save(document, args.json, args.csv, peer_rows.ROW_FIELDS)
    print(f"done in {time.perf_counter() - began:.0f} s", flush=True)
    # Peers that fail are results. dash_attn failing, grossly wrong (10x past
    # FA3's error rule: a wiring or kernel bug, not rounding) or not bitwise
    # reproducible in its deterministic mode fails the run.
    bad = [r for r in document["rows"] if r["impl"] == peer_rows.DASH and (
        peer_rows.status_kind(r["status"]) == "error" or not (r.get("error_ratio", 0.0) <= 10.0)
        or (r["deterministic"] and r.get("bitwise") is False))]
    return peer_rows.exit_status([f"{row['label']} {row['pass']} hdim {row['head_dim']} {row['mask']} {row['seqlen']}: "
                                  f"status {row['status']}, verified {row.get('verified')}, "
                                  f"bitwise {row.get('bitwise')}" for row in bad], skipped)


if __name__ == "__main__":
    sys.exit(main())
