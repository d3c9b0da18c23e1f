"""TFLOPS vs seqlen, one panel per (pass, head_dim, mask), the way the FA3
and DASH papers draw it: every implementation of a peers JSON
(bench/peers.py), dash_attn from a dash-bench JSON when given (else from the
peers JSON), and FA3's anchors (measured once, drawn dashed and labelled so).

    python3 bench/plot_tflops.py DASH_BENCH.json|- PEERS.json OUT.svg   (needs matplotlib)
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peer_rows  # noqa: E402
from peer_rows import SEQLENS, series  # noqa: E402

CONFIGS = [(h, m) for h in (64, 128) for m in ("full", "causal")]


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
                    lines.append(("dash_attn", series(ours["rows"], **shape), "dash"))
                else:
                    lines += [("dash_attn atomic", series(ours["rows"], schedule="atomic", **shape), "dash"),
                              ("dash_attn det. (auto)", series(ours["rows"], schedule="auto", **shape), "dash")]
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

    labels = list(dict.fromkeys(label for p in figure_panels for label, _, _ in p["lines"]))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {label: cycle[i % len(cycle)] for i, label in enumerate(labels)}
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
    ours = None if args.dash_bench == "-" else json.load(open(args.dash_bench))
    if ours:
        ours["rows"] = peer_rows.standard_grid_rows(ours["rows"])
    peers = peer_rows.load_peers(json.load(open(args.peers)))
    anchors = None if args.anchors == "-" else json.load(open(args.anchors))
    source = f"dash_attn {ours['commit']}" if ours else f"commit {peers.get('commit', '-')}"
    plot(panels(ours, peers, anchors), args.out,
         f"bf16 on {(ours or peers).get('device')}, {source}, torch {peers.get('torch')}, 16k tokens, hidden 2048")


if __name__ == "__main__":
    main()
