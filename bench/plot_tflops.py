"""TFLOPS vs seqlen, one panel per (pass, head_dim, mask), the way the FA3
and DASH papers draw it: every implementation of a peers JSON
(bench/peers.py), dash_attn from a dash-bench JSON when given (else from the
peers JSON), and FA3's anchors (measured once, drawn dashed and labelled so).

    python3 bench/plot_tflops.py DASH_BENCH.json|- PEERS.json OUT.svg   (needs matplotlib)

Every series has its own colour, whatever their number. An input that should
give dash_attn's lines (the dash-bench JSON, or the peers JSON without one)
but has no dash_attn row of the standard grid is an error naming the file.
"""
import argparse
import colorsys
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peer_rows  # noqa: E402
from peer_rows import SEQLENS, series  # noqa: E402

CONFIGS = [(h, m) for h in (64, 128) for m in ("full", "causal")]

# Matplotlib's default colour cycle (tab10) for the first ten series.
BASE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
               "#17becf")


def _extra_color(step):
    """The step-th candidate colour after tab10: hue stepped by the golden
    ratio, lightness and saturation by other irrational steps, so the
    candidates spread over the space and never run out."""
    def fraction(x):
        return x - int(x)
    hue = fraction(0.07 + step * 0.6180339887498949)
    lightness = 0.3 + 0.35 * fraction(step * 0.4142135623730951)
    saturation = 0.5 + 0.45 * fraction(step * 0.7320508075688772)
    return tuple(round(c * 255) for c in colorsys.hls_to_rgb(hue, lightness, saturation))


def _distance(a, b):
    """Squared 'redmean' distance: RGB weighted roughly as the eye sees it."""
    mean_red = (a[0] + b[0]) / 2
    dr, dg, db = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return (2 + mean_red / 256) * dr * dr + 4 * dg * dg + (2 + (255 - mean_red) / 256) * db * db


def series_colors(labels):
    """{label: '#rrggbb'}, a different colour for each distinct label (in
    first-seen order): tab10 first; each further series takes, of a pool of
    distinct candidates, the one farthest from every colour already used, so
    an eleventh series does not look like one of the first ten."""
    labels = list(dict.fromkeys(labels))
    taken = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in BASE_COLORS[:len(labels)]]
    extra = len(labels) - len(taken)
    if extra > 0:
        pool, step = {}, 0
        while len(pool) < max(256, 4 * extra):
            color = _extra_color(step)
            step += 1
            if color not in taken:
                pool[color] = min(_distance(color, t) for t in taken)
        for _ in range(extra):
            chosen = max(pool, key=pool.get)
            del pool[chosen]
            taken.append(chosen)
            for color in pool:
                pool[color] = min(pool[color], _distance(color, chosen))
    return {label: "#{:02x}{:02x}{:02x}".format(*rgb) for label, rgb in zip(labels, taken)}


class InputError(ValueError):
    """An input file the plot cannot use; the message names the file."""


def require_dash_rows(rows, path, what):
    """Raises InputError when `rows` (a file's rows, standard grid only) has
    no ok dash_attn row: its lines would silently be missing from the plot."""
    if not any(r.get("impl") == peer_rows.DASH and peer_rows.is_ok(r) for r in rows):
        impls = sorted({str(r.get("impl")) for r in rows})
        raise InputError(f"{path}: no dash_attn row with status ok on the standard grid (16k tokens, hidden 2048) in "
                         f"this {what}; rows found: {len(rows)}, impls: {', '.join(impls) or 'none'}")


def panels(ours, peers, anchors):
    """[{pass, head_dim, mask, title, lines: [(label, values, kind)]}] with
    kind 'dash', 'peer' or 'anchor'; values per SEQLENS, None where missing.
    Lines with no value at all are left out."""
    result = []
    for pass_, name in (("fwd", "forward"), ("bwd", "backward")):
        for head_dim, mask in CONFIGS:
            key, lines = f"{head_dim} {mask}", []
            if ours:
                shape = {"pass": pass_, "head_dim": head_dim, "mask": mask}
                if pass_ == "fwd":
                    lines.append(("dash_attn", series(ours["rows"], impl=peer_rows.DASH, **shape), "dash"))
                else:
                    lines += [("dash_attn atomic", series(ours["rows"], impl=peer_rows.DASH, schedule="atomic", **shape),
                               "dash"),
                              ("dash_attn det. (auto)", series(ours["rows"], impl=peer_rows.DASH, schedule="auto",
                                                               **shape), "dash")]
            for impl, deterministic in peer_rows.variants_in(peers["rows"], pass_):
                if impl == peer_rows.DASH and ours:
                    continue  # dash-bench's own numbers are drawn instead
                if pass_ == "fwd" and deterministic and impl != peer_rows.DASH:
                    continue  # a deterministic mode changes the backward only
                if pass_ == "fwd" and impl == peer_rows.DASH and not deterministic:
                    continue
                values = series(peers["rows"], impl=impl, deterministic=deterministic, head_dim=head_dim, mask=mask,
                                **{"pass": pass_})
                label = "dash_attn" if pass_ == "fwd" and impl == peer_rows.DASH else \
                    peer_rows.label(impl, deterministic)
                lines.append((label, values, "dash" if impl == peer_rows.DASH else "peer"))
            if anchors:
                if pass_ == "fwd":
                    lines.append(("FA3 (anchor)", anchors["fwd"][key], "anchor"))
                else:
                    lines += [("FA3 non-det. (anchor)", anchors["bwd_nondeterministic"][key], "anchor"),
                              ("FA3 det. (anchor)", anchors["bwd_deterministic"][key], "anchor")]
            lines = [line for line in lines if any(v is not None for v in line[1])]
            result.append(dict(pass_=pass_, head_dim=head_dim, mask=mask, title=f"{name}, hdim {head_dim}, {mask}",
                               lines=lines))
    return result


def plot(figure_panels, out_path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = series_colors(label for p in figure_panels for label, _, _ in p["lines"])
    styles = {"dash": dict(linestyle="-", marker="o", linewidth=2.2), "peer": dict(linestyle=":", marker="."),
              "anchor": dict(linestyle="--", marker="s", markersize=4)}
    columns = len(CONFIGS)
    fig, axes = plt.subplots(2, columns, figsize=(4.5 * columns, 8.5), sharex=True)
    for index, panel in enumerate(figure_panels):
        ax = axes[index // columns][index % columns]
        for label, values, kind in panel["lines"]:
            points = [(s, v) for s, v in zip(SEQLENS, values) if v is not None]
            ax.plot([s for s, _ in points], [v for _, v in points], label=label, color=colors[label], **styles[kind])
        ax.set_xscale("log", base=2)
        ax.set_xticks(SEQLENS, ["512", "1k", "2k", "4k", "8k", "16k"])
        ax.set_title(panel["title"])
        ax.set_ylabel("TFLOPS")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    # One legend for the figure: panels can lack a line (a refused mode).
    handles = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04 + 0.025 * ((len(handles) - 1) // 6), 1, 1))
    fig.savefig(out_path)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dash_bench", help="dash-bench JSON, or - for none")
    parser.add_argument("peers", help="bench/peers.py JSON")
    parser.add_argument("out", help="output image (.svg, .png)")
    parser.add_argument("--anchors", default=str(pathlib.Path(__file__).with_name("fa3_anchors.json")),
                        help="FA3 anchors JSON, or - for none")
    args = parser.parse_args(argv)
    try:
        ours = None if args.dash_bench == "-" else json.load(open(args.dash_bench))
        if ours:
            ours["rows"] = peer_rows.standard_grid_rows(ours["rows"])
            require_dash_rows(ours["rows"], args.dash_bench, "dash-bench file")
        peers = peer_rows.load_peers(json.load(open(args.peers)))
        if not ours:  # dash_attn's lines come from the peers file then
            require_dash_rows(peer_rows.standard_grid_rows(peers["rows"]), args.peers, "peers file")
    except InputError as error:
        sys.exit(f"plot_tflops.py: {error}")
    anchors = None if args.anchors == "-" else json.load(open(args.anchors))
    source = f"dash_attn {ours['commit']}" if ours else f"commit {peers.get('commit', '-')}"
    plot(panels(ours, peers, anchors), args.out,
         f"bf16 on {(ours or peers).get('device')}, {source}, torch {peers.get('torch')}, 16k tokens, hidden 2048")


if __name__ == "__main__":
    main()
