"""TFLOPS vs seqlen, one panel per (pass, head_dim, mask), the way the FA3 and
DASH papers draw it: dash_attn next to FA3's anchors and PyTorch SDPA.

    python3 bench/plot_tflops.py DASH_BENCH.json PEERS.json OUT.svg   (needs matplotlib)
"""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def series(rows, **match):
    found = {r["seqlen"]: r["tflops"] for r in rows if all(r.get(k) == v for k, v in match.items())}
    return [found.get(s) for s in SEQLENS]


def main():
    ours = json.load(open(sys.argv[1]))
    peers = [r for r in json.load(open(sys.argv[2]))["rows"] if "error" not in r]
    anchors = json.load(open(pathlib.Path(__file__).with_name("fa3_anchors.json")))
    configs = [(h, m) for h in (64, 128) for m in ("full", "causal")]
    fig, axes = plt.subplots(2, 4, figsize=(18, 8), sharex=True)
    for col, (h, m) in enumerate(configs):
        key = f"{h} {m}"
        fwd, bwd = axes[0][col], axes[1][col]
        fwd.plot(SEQLENS, series(ours["rows"], **{"pass": "fwd", "head_dim": h, "mask": m}), "o-", label="dash_attn")
        fwd.plot(SEQLENS, anchors["fwd"][key], "s--", label="FA3 (anchor)")
        for impl in ("sdpa_cudnn", "sdpa_flash"):
            fwd.plot(SEQLENS, series(peers, impl=impl, pass_="fwd", head_dim=h, mask=m, deterministic=False), ".:",
                     label=impl)
        for schedule, style in (("atomic", "o-"), ("auto", "^-")):
            bwd.plot(SEQLENS, series(ours["rows"], **{"pass": "bwd", "schedule": schedule, "head_dim": h, "mask": m}),
                     style, label=f"dash_attn {schedule}" + (" (det.)" if schedule == "auto" else ""))
        bwd.plot(SEQLENS, anchors["bwd_nondeterministic"][key], "s--", label="FA3 non-det. (anchor)")
        bwd.plot(SEQLENS, anchors["bwd_deterministic"][key], "d--", label="FA3 det. (anchor)")
        bwd.plot(SEQLENS, series(peers, impl="sdpa_cudnn", pass_="bwd", head_dim=h, mask=m), ".:", label="sdpa_cudnn")
        bwd.plot(SEQLENS, series(peers, impl="sdpa_flash", pass_="bwd", head_dim=h, mask=m, deterministic=True), ".:",
                 label="sdpa_flash det.")
        for ax, name in ((fwd, "forward"), (bwd, "backward")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(SEQLENS, ["512", "1k", "2k", "4k", "8k", "16k"])
            ax.set_title(f"{name}, hdim {h}, {m}")
            ax.set_ylabel("TFLOPS")
            ax.grid(alpha=0.3)
        if col == 0:
            fwd.legend(fontsize=8)
            bwd.legend(fontsize=8)
    fig.suptitle(f"bf16 on {ours['device']}, dash_attn {ours['commit']}, 16k tokens, hidden 2048")
    fig.tight_layout()
    fig.savefig(sys.argv[3])


if __name__ == "__main__":
    main()
