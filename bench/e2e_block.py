"""End to end: forward + backward of one Llama-style transformer block
(bench/llama_block.py; Llama-3-8B shapes by default), bf16, causal, with each
attention implementation inside the same block, same weights, same inputs.
Per implementation and seqlen: the step time (median/min/max over --reps after
warm-up), the attention's own forward + backward time on the same shapes and
its share of the step, the time relative to SDPA (its own backend choice) and
to dash_attn's atomic mode, a bitwise rerun check of every gradient, and the
block output's largest difference from SDPA's.

    python3 bench/e2e_block.py [--seqlens 4096,8192] [--batch 1] [--reps 20]
                               [--impls dash_attn:det,sdpa_default,...] [--json FILE] [--csv FILE] [--commit SHA]
"""
import os

# PyTorch's default cuBLAS workspace on Hopper (32 MiB), named explicitly:
# torch.use_deterministic_algorithms(True), which the deterministic SDPA rows
# run under, refuses cuBLAS GEMMs unless this variable is set. It must be set
# before CUDA initializes, and it changes nothing else on sm_90.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

import attention_impls  # noqa: E402
import e2e_rows  # noqa: E402
import peer_rows  # noqa: E402
from cuda_timing import bitwise_diff, time_calls  # noqa: E402
from llama_block import BlockConfig, LlamaBlock, rope_tables  # noqa: E402
from result_files import add_output_arguments, save  # noqa: E402
from run_environment import describe, environment  # noqa: E402


def parse_args(argv):
    defaults = BlockConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--seqlens", type=ints, default=[4096, 8192])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reps", type=int, default=20, help="timed steps (median, min, max)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before timing")
    parser.add_argument("--impls", default="", help="comma-separated NAME, NAME:det or NAME:nondet (names as in "
                        f"bench/peers.py; default: {','.join(e2e_rows.E2E_DEFAULT)})")
    for field in ("hidden", "heads", "kv_heads", "head_dim", "intermediate"):
        parser.add_argument("--" + field.replace("_", "-"), type=int, default=getattr(defaults, field))
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.variants = peer_rows.parse_variants(args.impls, e2e_rows.E2E_DEFAULT)
    except ValueError as error:
        parser.error(str(error))
    args.config = BlockConfig(hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim,
                              intermediate=args.intermediate)
    return args


def _print_row(row):
    if e2e_rows.is_step_ok(row):
        bitwise = "equal" if row["bitwise"] else "DIFFER"
        attn_bitwise = "equal" if row["attn_bitwise"] else "DIFFER"
        text = (f"{row['step_median_ms']:8.2f} ({row['step_min_ms']:.2f}-{row['step_max_ms']:.2f}) "
                f"{row['attn_median_ms']:7.2f} {bitwise:>7} {attn_bitwise:>7} {row['out_max_diff_vs_sdpa']:9.2e}")
    else:
        text = row["status"][:120]
    print(f"{row['label']:22} {row['seqlen']:6} {text}", flush=True)


def _print_ratios(rows):
    for row in rows:
        if row.get("step_time_vs_sdpa") is None and row.get("step_time_vs_dash_atomic") is None:
            continue
        parts = [f"attention {100 * row['attn_share']:.0f}% of the step"]
        for name in ("sdpa", "dash_atomic"):
            if row.get(f"step_time_vs_{name}") is not None:
                parts.append(f"step {row[f'step_time_vs_{name}']:.3f}x {name.replace('_', ' ')}")
        print(f"   {row['label']:22} " + ", ".join(parts), flush=True)


def measure(name, impl, deterministic, block, tensors, args):
    """One implementation's row: the whole block step, then its attention
    alone, each timed and rerun for the bitwise check."""
    x, dout, cos, sin, reference, attention_inputs = tensors
    c = args.config
    row = dict(impl=name, label=peer_rows.label(name, deterministic), deterministic=deterministic,
               batch=args.batch, seqlen=x.shape[1], status=None)
    flops = e2e_rows.block_flops(c.matmul_params(), args.batch, x.shape[1], c.heads, c.head_dim)
    weights = list(block.parameters())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with impl.mode(deterministic):
                attn = impl.function(True, deterministic)
                if name == "sdpa_default":
                    row["sdpa_backend"] = attention_impls.sdpa_default_choice(*attention_inputs[:3], True)
                step = lambda: torch.autograd.grad(block(x, attn, cos, sin), [x] + weights, dout)  # noqa: E731
                timing = time_calls(step, args.reps, args.warmup, args.device)
                row.update({f"step_{key}": value for key, value in timing.items()})
                diffs = [bitwise_diff(a, b) for a, b in zip(step(), step())]
                row["bitwise"] = all(equal for equal, _ in diffs)
                row["max_abs_diff"] = max(diff for _, diff in diffs)
                with torch.no_grad():
                    row["out_max_diff_vs_sdpa"] = (block(x, attn, cos, sin).double() - reference).abs().max().item()
                q, k, v, attn_dout = attention_inputs
                attention = lambda: torch.autograd.grad(attn(q, k, v), (q, k, v), attn_dout)  # noqa: E731
                timing = time_calls(attention, args.reps, args.warmup, args.device)
                row.update({f"attn_{key}": value for key, value in timing.items() if key != "warmup_s"})
                row["attn_bitwise"] = all(equal for equal, _ in (bitwise_diff(a, b)
                                                                 for a, b in zip(attention(), attention())))
                row.update(status="ok", step_tflops=peer_rows.tflops(flops["step"], row["step_median_ms"]),
                           attn_tflops=peer_rows.tflops(flops["attention"], row["attn_median_ms"]))
        except Exception as error:  # noqa: BLE001: a refusal or failure is a result row
            row["status"] = peer_rows.status_from_error(type(error).__name__, str(error),
                                                        [str(w.message) for w in caught])
            if args.device != "cpu":
                torch.cuda.empty_cache()
        notes = [n for n in dict.fromkeys(peer_rows.warning_line(w.message) for w in caught) if n][:3]
    row["notes"] = "; ".join(n[:200] for n in notes) or None
    _print_row(row)
    return row


def measure_seqlen(seqlen, block, implementations, args):
    c, device = args.config, args.device
    make = lambda *shape: torch.randn(*shape, device=device, dtype=torch.bfloat16)  # noqa: E731
    x = make(args.batch, seqlen, c.hidden).requires_grad_()
    dout = make(args.batch, seqlen, c.hidden)
    cos, sin = rope_tables(seqlen, c.head_dim, c.rope_base, device, torch.bfloat16)
    attention_inputs = (make(args.batch, seqlen, c.heads, c.head_dim).requires_grad_(),
                        make(args.batch, seqlen, c.kv_heads, c.head_dim).requires_grad_(),
                        make(args.batch, seqlen, c.kv_heads, c.head_dim).requires_grad_(),
                        make(args.batch, seqlen, c.heads, c.head_dim))
    # The yardstick for "does this implementation compute the same block":
    # SDPA with its own backend choice, outside any timed region.
    sdpa = attention_impls.make("sdpa_default")
    with torch.no_grad(), sdpa.mode(False):
        reference = block(x, sdpa.function(True, False), cos, sin).double()
    rows = [measure(name, implementations[name], deterministic, block,
                    (x, dout, cos, sin, reference, attention_inputs), args)
            for name, deterministic in args.variants]
    del x, dout, reference, attention_inputs
    gc.collect()
    if device != "cpu":
        torch.cuda.empty_cache()
    return e2e_rows.annotate(rows)


def main(argv=None):
    args = parse_args(argv)
    implementations, skipped, args.variants = attention_impls.available(args.variants)
    torch.manual_seed(0)
    with torch.device(args.device):  # initialized where it runs: 218M weights at the default shapes
        block = LlamaBlock(args.config).to(dtype=torch.bfloat16)
    document = environment(args.device, args.commit)
    document.update(dtype="bf16", causal=True, batch=args.batch, repetitions=args.reps, warmup=args.warmup,
                    block=dataclasses.asdict(args.config),
                    skipped=skipped, rows=[],
                    method="CUDA events per step after warm-up and a GPU spin; median/min/max; step = block forward + "
                           "autograd.grad of the input and every weight; attention = its forward + "
                           "autograd.grad on fresh normal q, k, v of the block's shapes")
    print(f"{describe(document)}; block {document['block']}", flush=True)
    print(f"{'implementation':22} {'seqlen':>6} {'step ms (min-max)':>25} {'attn ms':>7} {'bitwise':>7} "
          f"{'attn bw':>7} {'out diff':>9}", flush=True)
    began = time.perf_counter()
    for seqlen in args.seqlens:
        rows = measure_seqlen(seqlen, block, implementations, args)
        _print_ratios(rows)
        document["rows"] += rows
        document["elapsed_s"] = round(time.perf_counter() - began, 1)
        save(document, args.json, args.csv, e2e_rows.E2E_FIELDS)
    print(f"done in {time.perf_counter() - began:.0f} s", flush=True)
    # dash_attn's deterministic attention must be bitwise reproducible and run.
    bad = [r for r in document["rows"] if (r["impl"], r["deterministic"]) == (peer_rows.DASH, True)
           and (not e2e_rows.is_step_ok(r) or not r.get("attn_bitwise"))]
    return peer_rows.exit_status([f"{row['label']} seqlen {row['seqlen']}: status {row['status']}, "
                                  f"attention bitwise {row.get('attn_bitwise')}" for row in bad], skipped)


if __name__ == "__main__":
    sys.exit(main())
