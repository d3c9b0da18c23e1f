"""Markdown tables from a dash-bench JSON, a peers JSON (bench/peers.py, or
the older SDPA-only bench/results/*sdpa_peers*.json) and the FA3 anchors:
TFLOPS per implementation at each seqlen for every (head_dim, mask) and pass,
dash_attn relative to the best peer, issue 5's bars, the bitwise rerun
results and the modes that were refused. FA3 columns are anchors measured once (issues 4 and 5),
not measured in the run; they are labelled so.

    python3 bench/make_tables.py DASH_BENCH.json|- PEERS.json [bench/fa3_anchors.json] [--hdims 256] > tables.md
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peer_rows  # noqa: E402
from peer_rows import SEQLENS, series  # noqa: E402

CONFIGS = [(h, m) for h in (64, 128) for m in ("full", "causal")]
SEQLEN_NAMES = ["512", "1k", "2k", "4k", "8k", "16k"]
BWD_SCHEDULES = ("atomic", "fa3", "descending", "shift", "symmetric_shift", "auto")


def _number(value):
    return "-" if value is None else f"{value:.0f}"


def _percent(value):
    return "-" if value is None else f"{100 * value:.0f}"


def _ratio(ours, theirs):
    return [None if a is None or not b else a / b for a, b in zip(ours, theirs)]


def _table(header, lines):
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] +
                     ["| " + " | ".join(line) + " |" for line in lines])


def _dash_bench_series(ours, pass_, head_dim, mask, schedule=None):
    match = {"pass": pass_, "head_dim": head_dim, "mask": mask}
    if schedule:
        match["schedule"] = schedule
    return series(ours["rows"], **match)


def _anchor_rows(anchors, pass_, key):
    if key not in anchors["fwd"]:
        return []  # the anchors cover hdim 64 and 128
    if pass_ == "fwd":
        return [("FA3 (anchor)", anchors["fwd"][key])]
    return [("FA3 non-det. (anchor)", anchors["bwd_nondeterministic"][key]),
            ("FA3 det. (anchor)", anchors["bwd_deterministic"][key])]


def tflops_table(ours, peers, anchors, pass_, configs=CONFIGS):
    """One line per (hdim, mask, implementation): TFLOPS at each seqlen."""
    lines = []
    for head_dim, mask in configs:
        key = f"{head_dim} {mask}"
        named = []
        if ours:
            if pass_ == "fwd":
                named.append(("dash_attn (dash-bench)", _dash_bench_series(ours, "fwd", head_dim, mask)))
            else:
                named += [("dash_attn atomic (dash-bench)", _dash_bench_series(ours, "bwd", head_dim, mask, "atomic")),
                          ("dash_attn auto, det. (dash-bench)",
                           _dash_bench_series(ours, "bwd", head_dim, mask, "auto"))]
        for impl, deterministic in peer_rows.variants_in(peers["rows"], pass_):
            values = series(peers["rows"], impl=impl, deterministic=deterministic, head_dim=head_dim, mask=mask,
                            **{"pass": pass_})
            suffix = " (package)" if impl == peer_rows.DASH else ""
            named.append((peer_rows.label(impl, deterministic) + suffix, values))
        named += _anchor_rows(anchors, pass_, key) if anchors else []
        lines += [[key, name] + [_number(v) for v in values] for name, values in named if any(
            v is not None for v in values)]
    return _table(["hdim, mask", "implementation"] + SEQLEN_NAMES, lines)


def best_peer_series(rows, pass_, head_dim, mask):
    """The best peer's TFLOPS at each seqlen (any non-dash implementation and mode)."""
    best = [None] * len(SEQLENS)
    for impl, deterministic in peer_rows.variants_in(rows, pass_):
        if impl != peer_rows.DASH:
            values = series(rows, impl=impl, deterministic=deterministic, head_dim=head_dim, mask=mask,
                            **{"pass": pass_})
            best = [v if b is None or (v is not None and v > b) else b for b, v in zip(best, values)]
    return best


def ratio_table(ours, peers, anchors, configs=CONFIGS):
    """dash_attn (package, in the peers run) as % of the best peer of that run
    (any mode, and the best deterministic one); dash-bench's numbers (another
    process) as % of that best peer and of the FA3 anchors. Backward:
    dash-bench's auto (deterministic) schedule, against FA3's deterministic
    anchor."""
    none, lines = [None] * len(SEQLENS), []
    for pass_ in peer_rows.PASSES:
        for head_dim, mask in configs:
            key = f"{head_dim} {mask}"
            shape = dict(impl=peer_rows.DASH, head_dim=head_dim, mask=mask, **{"pass": pass_})
            cells = [series(peers["rows"], field="ratio_to_best_peer", deterministic=True, **shape),
                     series(peers["rows"], field="ratio_to_best_det_peer", deterministic=True, **shape),
                     # The forward is the same kernel in both modes: one column is enough.
                     series(peers["rows"], field="ratio_to_best_peer", deterministic=False, **shape)
                     if pass_ == "bwd" else none]
            mine = _dash_bench_series(ours, pass_, head_dim, mask, None if pass_ == "fwd" else "auto") \
                if ours else none
            cells.append(_ratio(mine, best_peer_series(peers["rows"], pass_, head_dim, mask)))
            anchor = anchors["fwd" if pass_ == "fwd" else "bwd_deterministic"].get(key) if anchors else None
            cells.append(_ratio(mine, anchor) if anchor else none)
            if any(v is not None for cell in cells for v in cell):
                lines.append([pass_, key] + [" ".join(_percent(v) for v in cell) for cell in cells])
    header = ["pass", "hdim, mask", "det. % of best peer", "det. % of best det. peer", "atomic % of best peer",
              "dash-bench % of best peer", "dash-bench % of FA3 (anchor)"]
    return _table(header, lines)


def schedule_table(ours, configs=CONFIGS):
    lines = []
    for head_dim, mask in configs:
        per = [_dash_bench_series(ours, "bwd", head_dim, mask, s) for s in BWD_SCHEDULES]
        if any(v is not None for p in per for v in p):
            lines.append([f"{head_dim} {mask}"] + [" ".join(_number(v) for v in p) for p in per])
    return _table(["hdim, mask"] + list(BWD_SCHEDULES), lines)


ATOMIC_BAR, DETERMINISTIC_BAR = 0.85, 0.90  # issue 5


def bars_table(ours, anchors, configs=CONFIGS):
    """Issue 5's two bars from the dash-bench rows: our atomic schedule as a
    share of FA3's non-deterministic anchor (bar 85%), and the best
    deterministic schedule of the run, and auto, as a share of our atomic
    (bar 90%); the last line counts the rows at each bar."""
    lines, met, rows = [], [0, 0], 0
    for head_dim, mask in configs:
        key = f"{head_dim} {mask}"
        anchor = anchors["bwd_nondeterministic"].get(key) if anchors else None
        atomic = _dash_bench_series(ours, "bwd", head_dim, mask, "atomic")
        per = [_dash_bench_series(ours, "bwd", head_dim, mask, s) for s in BWD_SCHEDULES if s != "atomic"]
        best = [max((v for v in column if v is not None), default=None) for column in zip(*per)]
        if not anchor or all(v is None for v in atomic):
            continue
        shares = [_ratio(atomic, anchor), _ratio(best, atomic),
                  _ratio(_dash_bench_series(ours, "bwd", head_dim, mask, "auto"), atomic)]
        for i, bar in enumerate((ATOMIC_BAR, DETERMINISTIC_BAR)):
            met[i] += sum(v is not None and v >= bar for v in shares[i])
        rows += len(SEQLENS)
        lines.append([key] + [" ".join(_percent(v) for v in cell) for cell in shares])
    header = ["hdim, mask", f"atomic % of FA3 non-det. (bar {ATOMIC_BAR:.0%})",
              f"best det. schedule % of our atomic (bar {DETERMINISTIC_BAR:.0%})", "auto (det.) % of our atomic"]
    return _table(header, lines) + f"\n\nRows at the bars: atomic {met[0]}/{rows}, deterministic {met[1]}/{rows}."


def determinism_table(peers):
    """Per implementation and mode: backward rows whose rerun was bitwise
    equal, of those measured, and the largest difference seen."""
    lines = []
    for impl, deterministic in peer_rows.variants_in(peers["rows"], "bwd"):
        rows = [r for r in peers["rows"] if r["pass"] == "bwd" and r["impl"] == impl and
                bool(r.get("deterministic")) == deterministic and peer_rows.is_ok(r) and r.get("bitwise") is not None]
        if not rows:
            continue
        diffs = [max(r.get(f"max_abs_diff_{t}") or 0.0 for t in ("dq", "dk", "dv")) for r in rows]
        verified = [r for r in rows if r.get("verified") is not None]
        lines.append([peer_rows.label(impl, deterministic), f"{sum(bool(r['bitwise']) for r in rows)}/{len(rows)}",
                      f"{max(diffs):.3g}",
                      f"{sum(bool(r['verified']) for r in verified)}/{len(verified)}" if verified else "-"])
    return _table(["implementation", "bitwise equal reruns", "largest rerun difference",
                   "within FA3's error rule"], lines)


def refused_lines(peers):
    """One line per implementation and mode that was refused or failed, with
    the first reason and on how many rows."""
    reasons = {}
    for row in peers["rows"]:
        kind = peer_rows.status_kind(row.get("status"))
        if kind != "ok":
            key = (peer_rows.label(row["impl"], row.get("deterministic", False)), row["pass"])
            first, count = reasons.get(key, (row["status"], 0))
            reasons[key] = (first, count + 1)
    return [f"- {label} {pass_}: {status} ({count} rows)" for (label, pass_), (status, count) in reasons.items()]


def render(ours, peers, anchors, configs=CONFIGS):
    """The whole markdown text; ours (dash-bench JSON) and anchors may be None."""
    out = []
    if ours:
        out.append(f"dash-bench: commit {ours.get('commit')} on {ours.get('device')}.")
    out.append(f"peers: commit {peers.get('commit', '-')}, torch {peers.get('torch')}, CUDA {peers.get('cuda', '-')}, "
               f"cuDNN {peers.get('cudnn', '-')} on {peers.get('device')}, {peers.get('date', 'date not recorded')}.")
    if anchors:
        out.append(f"FA3 rows are anchors, not measured in this run: {anchors.get('source', '')}.")
    for pass_, name in (("fwd", "Forward"), ("bwd", "Backward")):
        out += ["", f"### {name} (TFLOPS)", "", tflops_table(ours, peers, anchors, pass_, configs)]
    out += ["", "### dash_attn relative to the best peer (%, seqlen 512 1k 2k 4k 8k 16k)", "",
            "Peers: every implementation but dash_attn in the peers run; det. peers ran in their deterministic "
            "mode and, for the backward, reran bitwise equal. det./atomic: dash_attn through its package in the "
            "peers run; dash-bench: forward, and the auto (deterministic) backward against FA3's deterministic "
            "anchor.", "", ratio_table(ours, peers, anchors, configs)]
    if ours:
        out += ["", "### Backward per schedule, dash-bench (TFLOPS, seqlen 512 1k 2k 4k 8k 16k)", "",
                schedule_table(ours, configs)]
        if anchors:
            out += ["", "### Issue 5's bars, dash-bench (%, seqlen 512 1k 2k 4k 8k 16k)", "",
                    bars_table(ours, anchors, configs)]
    if any("bitwise" in r for r in peers["rows"]):
        out += ["", "### Backward reruns (same inputs, twice)", "", determinism_table(peers)]
    refused = refused_lines(peers)
    if refused:
        out += ["", "### Not measured", ""] + refused
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dash_bench", help="dash-bench JSON, or - for none")
    parser.add_argument("peers", help="bench/peers.py JSON")
    parser.add_argument("anchors", nargs="?", default=str(pathlib.Path(__file__).with_name("fa3_anchors.json")))
    parser.add_argument("--hdims", default="64,128", help="head dims of the tables (the standard grid: 64,128)")
    args = parser.parse_args(argv)
    ours = None if args.dash_bench == "-" else json.load(open(args.dash_bench))
    if ours:
        ours["rows"] = peer_rows.standard_grid_rows(ours["rows"])
    peers = peer_rows.load_peers(json.load(open(args.peers)))
    anchors = json.load(open(args.anchors)) if args.anchors != "-" else None
    configs = [(int(h), m) for h in args.hdims.split(",") for m in ("full", "causal")]
    sys.stdout.write(render(ours, peers, anchors, configs))


if __name__ == "__main__":
    main()
