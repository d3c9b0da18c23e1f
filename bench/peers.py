"""Attention implementations side by side, in one process, on the same inputs
per shape: dash_attn through its PyTorch package (deterministic and atomic
backward), PyTorch SDPA's flash, cuDNN and memory-efficient backends (default
and deterministic mode), FlexAttention under torch.compile, and, when
importable, FlashAttention-2/3/4 and cuDNN's SDPA through cudnn-frontend's ops
(default and deterministic backward). Shapes (docs/benchmarks.md): the
standard grid, GQA rows (32 q heads on 8 kv heads, hdim 128, causal, 4k-16k)
and hdim 256 rows (8 heads, 4k, full and causal), and the score-mod rows of
Mistral (window 4096), Gemma 2 (softcap 50 + window 4096) and GPT-OSS (sinks),
each shape with its model's mods (peer_rows.SCORE_MOD_SHAPES); --rows picks
groups.
Forward and backward TFLOPS (CUDA events, warm-up, median/min/max of --reps),
a bitwise rerun check of every backward, one (batch, kv head) slice checked
against fp64, and each row's ratio to the best peer. Rows print as they are
measured; --json/--csv and bench/results/latest_peers.json (--latest-json)
are rewritten after every shape.

    python3 bench/peers.py [--rows standard,gqa,hdim256,score_mods] [--quick] [--reps 20]
                           [--impls dash_attn,sdpa_cudnn:nondet,fa4,cudnn,...]
                           [--window L,R] [--softcap X] [--sinks]
                           [--json FILE] [--csv FILE] [--latest-json FILE|none] [--commit SHA]

--window (FlashAttention's window_size, -1 unbounded, bottom-right aligned),
--softcap and --sinks (random per-head sink logits) run every shape with those
score mods: dash_attn and FA4 take all three (window_size=, softcap=,
learnable_sink=), FA2/FA3 window and softcap, SDPA the window alone (as a
boolean mask); other peers (cuDNN's frontend ops among them) get
'unsupported' rows saying so. TFLOPS then count the (row, key) pairs the band
leaves visible (band_fraction); the fp64 check applies the same mods.
"""
import argparse
import gc
import pathlib
import sys
import time
import warnings

import torch

import attention_impls
import reference_check
import peer_rows
from cuda_timing import SETTLE_S, bitwise_diff, settle_seconds, time_calls
from reference_check import ReferenceSlice
from reference_group import GroupReferenceSlice
from result_files import add_output_arguments, save, write_json
from run_environment import describe, environment


LATEST_DEFAULT = pathlib.Path(__file__).resolve().parent / "results" / "latest_peers.json"
# Options that shape the standard grid: given without --rows, the run is that grid alone (as before the groups).
GRID_OPTIONS = ("quick", "hdims", "seqlens", "total_tokens", "hidden")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--rows", help="row groups, comma-separated: " + ", ".join(peer_rows.ROW_GROUPS)
                        + " or all (default: " + ",".join(peer_rows.DEFAULT_ROW_GROUPS) + "; only standard when "
                          "--quick, --hdims, --seqlens, --total-tokens or --hidden is given)")
    parser.add_argument("--quick", action="store_true", help="standard grid: head_dim 128, seqlen 1k and 4k only")
    parser.add_argument("--hdims", type=ints, help="standard grid: head dims (default 64,128)")
    parser.add_argument("--seqlens", type=ints, help="standard grid: sequence lengths (default 512,...,16384)")
    parser.add_argument("--masks", default="full,causal", help="full, causal or full,causal (every group)")
    parser.add_argument("--total-tokens", type=int, help="standard grid: batch = total tokens / seqlen (16384)")
    parser.add_argument("--hidden", type=int, help="standard grid: heads = hidden / head_dim (2048)")
    parser.add_argument("--latest-json", help=f"also write the rows as a list of flat records here (default "
                        f"{LATEST_DEFAULT.relative_to(LATEST_DEFAULT.parents[2])} on cuda, none on cpu or with score "
                        "mods; 'none': not at all)")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per pass (median, min, max)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before timing")
    parser.add_argument("--passes", default=",".join(peer_rows.PASSES),
                        help="fwd, bwd or fwd,bwd: the passes timed (an A/B of forward kernels needs no backward)")
    parser.add_argument("--settle-s", type=float, default=None,
                        help="seconds the GPU idles before each pass's timed calls (default: "
                        f"{SETTLE_S} on a GPU, 0 on a CPU; cuda_timing.time_calls says why)")
    parser.add_argument("--impls", default="", help="comma-separated NAME, NAME:det or NAME:nondet; names: "
                        + ", ".join(peer_rows.IMPL_MODES) + f" (default: {','.join(peer_rows.PEERS_DEFAULT)})")
    parser.add_argument("--flex-dynamic", action="store_true",
                        help="compile FlexAttention for dynamic shapes (fewer compilations, kernels not specialized "
                             "per shape; default: one static compilation per shape)")
    parser.add_argument("--window", type=ints, help="L,R: FlashAttention's window_size for every shape (-1: unbounded)")
    parser.add_argument("--softcap", type=float, default=0.0, help="scores become softcap * tanh(s / softcap)")
    parser.add_argument("--sinks", action="store_true", help="learnable attention sinks (random per-head logits)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.window is not None and (len(args.window) != 2 or min(args.window) < -1):
        parser.error("--window takes L,R: two ints >= -1")
    if args.softcap < 0:
        parser.error("--softcap takes a number >= 0")
    passes = [p for p in args.passes.split(",") if p]
    if not passes or any(p not in peer_rows.PASSES for p in passes):
        parser.error("--passes takes fwd, bwd or fwd,bwd")
    args.passes = tuple(p for p in peer_rows.PASSES if p in passes)
    args.mods = ScoreMods(tuple(args.window or (-1, -1)), args.softcap, args.sinks)
    grid_given = any(getattr(args, name) not in (None, False) for name in GRID_OPTIONS)
    args.hdims = args.hdims or ([128] if args.quick else list(peer_rows.STANDARD_HDIMS))
    args.seqlens = args.seqlens or ([1024, 4096] if args.quick else list(peer_rows.SEQLENS))
    args.total_tokens = args.total_tokens or peer_rows.TOTAL_TOKENS
    args.hidden = args.hidden or peer_rows.HIDDEN
    args.masks = [m for m in args.masks.split(",") if m]
    if any(m not in peer_rows.MASKS for m in args.masks):
        parser.error("--masks takes full, causal or full,causal")
    if args.settle_s is not None and args.settle_s < 0:
        parser.error("--settle-s takes seconds >= 0")
    try:
        args.rows = peer_rows.parse_row_groups(
            args.rows or ("standard" if grid_given else ",".join(peer_rows.DEFAULT_ROW_GROUPS)))
        args.variants = peer_rows.parse_variants(args.impls, peer_rows.PEERS_DEFAULT)
    except ValueError as error:
        parser.error(str(error))
    if args.mods and "score_mods" in args.rows:
        parser.error("--rows score_mods: its shapes carry their own mods; --window, --softcap and --sinks apply to "
                     "the other groups, run them apart")
    args.shapes = peer_rows.row_set(args.rows, args.hdims, args.masks, args.seqlens, args.total_tokens, args.hidden)
    if not args.shapes:
        parser.error(f"no shapes: row groups {','.join(args.rows)} with masks {','.join(args.masks)}")
    if args.latest_json is None:  # score-mod rows would read as the standard ones there: only when asked
        args.latest_json = None if args.device == "cpu" or args.mods else str(LATEST_DEFAULT)
    elif args.latest_json.lower() in ("", "none"):
        args.latest_json = None
    return args


class ScoreMods:
    """The score mods of a run: window (left, right), softcap, sinks (bool)."""

    def __init__(self, window=(-1, -1), softcap=0.0, sinks=False):
        self.window, self.softcap, self.sinks = tuple(window), float(softcap), bool(sinks)

    def __bool__(self):
        return self.window != (-1, -1) or self.softcap > 0 or self.sinks

    def describe(self):
        parts = [f"window {self.window}"] if self.window != (-1, -1) else []
        parts += [f"softcap {self.softcap:g}"] if self.softcap else []
        return ", ".join(parts + (["sinks"] if self.sinks else [])) or "none"


def visible_mask(seqlen_q, seqlen_k, causal, window, device="cpu"):
    """(seqlen_q, seqlen_k) bool: FlashAttention's rule, bottom-right aligned."""
    left, right = window[0], 0 if causal else window[1]
    rows = torch.arange(seqlen_q, device=device)[:, None] + (seqlen_k - seqlen_q)
    cols = torch.arange(seqlen_k, device=device)[None, :]
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= cols <= rows + right
    if left >= 0:
        keep &= cols >= rows - left
    return keep


def band_fraction(seqlen_q, seqlen_k, causal, window):
    """The fraction of (row, key) pairs the mask leaves visible, counted row by
    row (O(seqlen)): what a windowed row's TFLOPS are counted on. No window:
    the papers' convention, 1 or 1/2 for causal (peer_rows.attention_flops)."""
    if tuple(window) == (-1, -1):
        return 0.5 if causal else 1.0
    left, right = window[0], 0 if causal else window[1]
    rows = torch.arange(seqlen_q, dtype=torch.int64) + (seqlen_k - seqlen_q)
    end = torch.clamp(rows + right + 1, 0, seqlen_k) if right >= 0 else torch.full_like(rows, seqlen_k)
    begin = torch.clamp(rows - left, 0, seqlen_k) if left >= 0 else torch.zeros_like(rows)
    return (end - begin).clamp(min=0).sum().item() / (seqlen_q * seqlen_k)


def _mods_attention_with_grads(q, k, v, dout, causal, dtype, mods, sink):
    """reference_check's one-head attention and gradients with the score mods."""
    q, k, v = (t.to(dtype).requires_grad_() for t in (q, k, v))
    scores = (q @ k.transpose(0, 1)) * q.shape[-1] ** -0.5
    if mods.softcap:
        scores = mods.softcap * torch.tanh(scores / mods.softcap)
    scores = scores.masked_fill(~visible_mask(q.shape[0], k.shape[0], causal, mods.window, q.device), float("-inf"))
    if sink is not None:
        scores = torch.cat([scores, sink.to(dtype).expand(q.shape[0], 1)], dim=1)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)[:, :k.shape[0]]
    out = probs @ v
    grads = torch.autograd.grad(out, (q, k, v), dout.to(dtype))
    return [t.detach() for t in (out, *grads)]


class ModsReferenceSlice:
    """reference_group's check (batch 0, kv head 0 and its q heads; FA3's rule)
    with the score mods applied: sinks (heads_q,) or None."""

    def __init__(self, q, k, v, dout, causal, mods, sinks):
        self.group = q.shape[2] // k.shape[2]
        key, value = k[0, :, 0, :].detach(), v[0, :, 0, :].detach()
        exact, naive = [[], [], [], []], [[], [], [], []]
        for head in range(self.group):
            inputs = (q[0, :, head, :].detach(), key, value, dout[0, :, head, :].detach())
            sink = sinks[head] if sinks is not None else None
            for results, dtype in ((exact, torch.float64), (naive, q.dtype)):
                for i, t in enumerate(_mods_attention_with_grads(*inputs, causal, dtype, mods, sink)):
                    results[i].append(t)
        self.exact = [torch.stack(exact[0]), torch.stack(exact[1]), sum(exact[2]), sum(exact[3])]
        naive = [torch.stack(naive[0]), torch.stack(naive[1])] + [sum(t.float() for t in naive[i]).to(q.dtype)
                                                                   for i in (2, 3)]
        self.tolerance = [2 * reference_check._error(n, e) + 1e-3 for n, e in zip(naive, self.exact)]

    def check(self, tensors, first=0):
        def cut(tensor, index):
            return tensor[0, :, :self.group, :].transpose(0, 1) if index < 2 else tensor[0, :, 0, :]
        errors = [reference_check._error(cut(t, first + i), self.exact[first + i]) for i, t in enumerate(tensors)]
        ratios = [e / self.tolerance[first + i] for i, e in enumerate(errors)]
        return max(errors), float("nan") if any(r != r for r in ratios) else max(ratios)


class WithScoreMods:
    """An implementation of attention_impls run with score mods, through its
    autograd function; one that cannot take them raises NotImplementedError
    naming what it lacks (an 'unsupported' row)."""

    protocol = "autograd"

    def __init__(self, name, impl, mods, sinks):
        self.name, self.impl, self.mods, self.sinks = name, impl, mods, sinks
        self.layout, self.min_warmup = impl.layout, getattr(impl, "min_warmup", 0)

    def mode(self, deterministic):
        return self.impl.mode(deterministic)

    def _refuse(self, lacking):
        raise NotImplementedError(f"not supported: {self.name} with {lacking} (no adapter in bench/peers.py)")

    def function(self, causal, deterministic):
        mods, window = self.mods, self.mods.window
        if self.name == peer_rows.DASH:
            import dash_attn

            schedule = "auto" if deterministic else "atomic"
            return lambda q, k, v: dash_attn.flash_attn_func(
                q, k, v, causal=causal, deterministic=deterministic, schedule=schedule, window_size=window,
                softcap=mods.softcap, learnable_sink=self.sinks)
        if self.name == "fa4":  # FA4 takes bf16 sinks and None for an unbounded side
            sinks = self.sinks.to(torch.bfloat16) if self.sinks is not None else None
            window4 = tuple(None if side < 0 else side for side in window)
            return lambda q, k, v: attention_impls.first_output(self.impl.func(
                q, k, v, softmax_scale=q.shape[-1] ** -0.5, causal=causal, deterministic=deterministic,
                window_size=window4, softcap=mods.softcap, learnable_sink=sinks))
        if self.name in ("fa2", "fa3") and not mods.sinks:
            func = self.impl.module.flash_attn_func
            return lambda q, k, v: attention_impls.first_output(func(
                q, k, v, causal=causal, deterministic=deterministic, window_size=window, softcap=mods.softcap))
        if self.name.startswith("sdpa") and not mods.sinks and not mods.softcap:
            sdpa = torch.nn.functional.scaled_dot_product_attention

            def attn(q, k, v):
                keep = visible_mask(q.shape[1], k.shape[1], causal, window, q.device)
                out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=keep,
                           enable_gqa=q.shape[2] != k.shape[2])
                return out.transpose(1, 2)
            return attn
        self._refuse(self.mods.describe())


def _print_row(row):
    verified = "-" if row.get("verified") is None else ("yes" if row["verified"] else f"NO {row['error_ratio']:.3g}x")
    bitwise = "-" if row.get("bitwise") is None else ("equal" if row["bitwise"] else "DIFFER")
    if peer_rows.is_ok(row):
        timing = f"{row['median_ms']:9.3f} {row['tflops']:7.1f} {verified:>8} {bitwise:>7}"
        if row.get("host_bound_reps"):
            timing += f"  (GPU idle before launch in {row['host_bound_reps']} reps)"
    else:
        timing = f"{'-':>9} {'-':>7} {'-':>8} {'-':>7}  {row['status'][:110]}"
    heads = f"{row['heads']}" if row["heads_kv"] == row["heads"] else f"{row['heads']}/{row['heads_kv']}"
    print(f"{row['label']:22} {row['pass']:4} {row['head_dim']:4} {row['mask']:6} {row['seqlen']:6} {row['batch']:5} "
          f"{heads:>5} {timing}", flush=True)


def _print_summary(rows):
    """The best-peer line of one shape's rows."""
    for pass_ in peer_rows.PASSES:
        mine = [r for r in rows if r["pass"] == pass_ and r["impl"] == peer_rows.DASH and peer_rows.is_ok(r)]
        best = next((r["best_peer"] for r in mine if r.get("best_peer")), None)
        if mine and best:
            ratios = ", ".join(f"{r['label']} {r['ratio_to_best_peer']:.2f}x" for r in mine)
            print(f"   {pass_}: best peer {best}; {ratios}", flush=True)


def _verify(row, check):
    row["max_error"], row["error_ratio"] = check
    row["verified"] = row["error_ratio"] <= 1.0  # FA3's rule; NaN fails


def measure_variant(name, impl, deterministic, tensors, causal, reference, args, base, mods):
    """The forward and backward rows of one implementation in one mode. An
    implementation that refuses the shape or mode, or fails, gives rows with
    that status instead of stopping the run. Protocol "autograd": the forward
    through the implementation's autograd function, the backward
    torch.autograd.grad on one retained graph; "direct_op" (cuDNN frontend):
    the forward op, then the backward op on its saved output and LSE, no
    autograd."""
    q, k, v, dout = tensors
    protocol = getattr(impl, "protocol", "autograd")
    rows = {p: dict(base, impl=name, label=peer_rows.label(name, deterministic), deterministic=deterministic,
                    schedule=("auto" if deterministic else "atomic") if name == peer_rows.DASH else None,
                    protocol=protocol, status=None, **{"pass": p})
            for p in args.passes}
    # The band's work: the visible fraction of the (row, key) pairs over the full matrix's count.
    fraction = band_fraction(base["seqlen"], base["seqlen"], causal, mods.window)
    flops = {p: peer_rows.attention_flops(base["batch"], base["heads"], base["seqlen"], base["seqlen"],
                                          base["head_dim"], False, p) * fraction for p in peer_rows.PASSES}
    warmup = max(args.warmup, getattr(impl, "min_warmup", 0))  # first-use compilation stays out of the samples

    def record(pass_, timing):
        rows[pass_].update(timing, tflops=peer_rows.tflops(flops[pass_], timing["median_ms"]), status="ok")
        _print_row(rows[pass_])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with impl.mode(deterministic):
                if protocol == "direct_op":
                    forward_op, backward_op = impl.direct(causal, deterministic)
                    forward = lambda: forward_op(q, k, v)[0]  # noqa: E731
                else:
                    attn = impl.function(causal, deterministic)
                    forward = lambda: attn(q, k, v)  # noqa: E731
                if "fwd" in args.passes:
                    timing = time_calls(forward, args.reps, warmup, args.device, args.settle_s)
                if protocol == "direct_op":
                    out, saved = forward_op(q, k, v)
                    backward = lambda: backward_op(q, k, v, out, saved, dout)  # noqa: E731
                else:
                    out = forward()
                    backward = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                if "fwd" in args.passes:
                    _verify(rows["fwd"], reference.check([out]))
                    record("fwd", timing)
                if "bwd" in args.passes:
                    timing = time_calls(backward, args.reps, warmup, args.device, args.settle_s)
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


def measure_shape(shape, implementations, args):
    """Every variant's rows of one shape (peer_rows.shape: head_dim, mask,
    seqlen, batch, heads = q heads, heads_kv, row_group; window, softcap and
    sinks where the shape has its own score mods, else the run's)."""
    base = dict(shape)
    batch, seqlen, head_dim = shape["batch"], shape["seqlen"], shape["head_dim"]
    causal = shape["mask"] == "causal"
    # Fresh normal inputs in FlashAttention's (batch, seqlen, heads, head_dim)
    # memory order, and the same values in (batch, heads, seqlen, head_dim)
    # order for SDPA and FlexAttention (their native one; an output gradient
    # in another order than the output can cost a copy or be refused).
    # Every implementation indexes them as (batch, seqlen, heads, head_dim);
    # k and v have heads_kv heads.
    make = lambda heads: torch.randn(batch, seqlen, heads, head_dim, device=args.device,  # noqa: E731
                                     dtype=torch.bfloat16)
    q, k, v, dout = make(shape["heads"]), make(shape["heads_kv"]), make(shape["heads_kv"]), make(shape["heads"])
    layouts = {"bshd": (q, k, v, dout)}
    if any(implementations[name].layout == "bhsd" for name, _ in args.variants):
        layouts["bhsd"] = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v, dout))
    for tensors in layouts.values():
        for t in tensors[:3]:
            t.requires_grad_()
    # (batch 0, head 0) in fp64; under GQA kv head 0 with its group of q heads.
    mods = ScoreMods(shape["window"], shape["softcap"], shape["sinks"]) if "window" in shape else args.mods
    sinks = None
    if mods.sinks:  # bf16-representable logits: FA4 takes them in bf16, dash_attn in fp32, the same values
        sinks = torch.randn(shape["heads"], generator=torch.Generator().manual_seed(0)).bfloat16().float()
        sinks = sinks.to(args.device)
    if mods:
        reference = ModsReferenceSlice(q, k, v, dout, causal, mods, sinks)
    else:
        reference = (ReferenceSlice if shape["heads_kv"] == shape["heads"] else GroupReferenceSlice)(q, k, v, dout,
                                                                                                      causal)
    if mods:
        base["score_mods"] = mods.describe()
        if "window" in shape:
            print(f"-- {shape['row_group']}: {base['score_mods']}", flush=True)
    rows = []
    for name, deterministic in args.variants:
        impl = implementations[name]
        if mods:
            impl = WithScoreMods(name, impl, mods, sinks)
        rows += measure_variant(name, impl, deterministic, layouts[impl.layout], causal, reference, args, base, mods)
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
    document.update(score_mods=dict(window=list(args.mods.window), softcap=args.mods.softcap, sinks=args.mods.sinks)
                    if args.mods else None)
    document.update(dtype="bf16", total_tokens=args.total_tokens, hidden=args.hidden, repetitions=args.reps,
                    warmup=args.warmup, settle_s=settle_seconds(args.device, args.settle_s),
                    fill_uninitialized_memory=False, flex_dynamic=args.flex_dynamic,
                    skipped=skipped, row_groups=args.rows, rows=[],
                    method="CUDA events per call after warm-up (at least one call for implementations that compile "
                           "on first use) and a GPU spin; median/min/max; fresh normal inputs per shape; backward "
                           "= autograd.grad (the whole backward; protocol 'autograd') or, for the cuDNN frontend, "
                           "a direct sdpa_bwd op call on the saved output and LSE (protocol 'direct_op'), run twice "
                           "more for the bitwise check; (batch 0, kv head 0 and its q heads) checked against fp64 "
                           "(FA3's rule)")
    print(describe(document), flush=True)
    print(f"{len(args.shapes)} shapes (row groups {','.join(args.rows)}), {len(args.variants)} variants", flush=True)
    if args.mods:
        print(f"score mods: {args.mods.describe()}; TFLOPS on the band's visible pairs; peers without an adapter for "
              "them (cuDNN's frontend ops and FlexAttention always, SDPA with softcap or sinks, FA2/FA3 with sinks) "
              "give 'unsupported' rows", flush=True)
    if args.latest_json:
        pathlib.Path(args.latest_json).parent.mkdir(parents=True, exist_ok=True)
    print(f"{'implementation':22} {'pass':4} {'hdim':4} {'mask':6} {'seqlen':>6} {'batch':>5} {'heads':>5} "
          f"{'ms':>9} {'TFLOPS':>7} {'verified':>8} {'bitwise':>7}", flush=True)
    began = time.perf_counter()
    for shape in args.shapes:
        rows = measure_shape(shape, implementations, args)
        document["rows"] += rows
        _print_summary(rows)
        document["elapsed_s"] = round(time.perf_counter() - began, 1)
        save(document, args.json, args.csv, peer_rows.ROW_FIELDS)
        if args.latest_json:
            write_json(args.latest_json, peer_rows.latest_records(document))
    print(f"done in {time.perf_counter() - began:.0f} s" +
          (f"; records in {args.latest_json}" if args.latest_json else ""), flush=True)
    # Peers that fail are results. dash_attn failing, grossly wrong (10x past
    # FA3's error rule: a wiring or kernel bug, not rounding) or not bitwise
    # reproducible in its deterministic mode fails the run.
    bad = [r for r in document["rows"] if r["impl"] == peer_rows.DASH and (
        peer_rows.status_kind(r["status"]) == "error" or not (r.get("error_ratio", 0.0) <= 10.0)
        or (r["deterministic"] and r.get("bitwise") is False))]
    return peer_rows.exit_status([f"{row['label']} {row['pass']} hdim {row['head_dim']} {row['mask']} {row['seqlen']} "
                                  f"batch {row['batch']} heads {row['heads']}/{row['heads_kv']}: "
                                  f"status {row['status']}, verified {row.get('verified')}, "
                                  f"bitwise {row.get('bitwise')}" for row in bad], skipped)


if __name__ == "__main__":
    sys.exit(main())
