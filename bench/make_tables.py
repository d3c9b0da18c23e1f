"""Markdown tables from a dash-bench JSON, an SDPA peers JSON and the FA3 anchors:
forward and backward TFLOPS per (head_dim, mask) and seqlen, with ratios.

    python3 bench/make_tables.py DASH_BENCH.json PEERS.json [bench/fa3_anchors.json]
"""
import json
import pathlib
import sys

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def cells(values):
    return " ".join("-" if v is None else f"{v:.0f}" for v in values)


def ratios(ours, theirs):
    return " ".join("-" if a is None or not b else f"{100 * a / b:.0f}" for a, b in zip(ours, theirs))


def main():
    ours = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2]))
    anchors = json.load(open(sys.argv[3] if len(sys.argv) > 3 else pathlib.Path(__file__).with_name("fa3_anchors.json")))

    def series(rows, **match):
        found = {r["seqlen"]: r["tflops"] for r in rows if all(r.get(k) == v for k, v in match.items())}
        return [found.get(s) for s in SEQLENS]

    rows, peer_rows = ours["rows"], [r for r in peers["rows"] if "error" not in r]
    configs = [(h, m) for h in (64, 128) for m in ("full", "causal")]
    print(f"dash_attn commit {ours['commit']} on {ours['device']}; peers: torch {peers['torch']} on {peers['device']}\n")
    print("### Forward (TFLOPS, seqlen 512 1k 2k 4k 8k 16k)\n")
    print("| hdim, mask | dash_attn | FA3 | SDPA cuDNN | SDPA flash | % of FA3 | % of cuDNN |\n|---|---|---|---|---|---|---|")
    for h, m in configs:
        key = f"{h} {m}"
        mine = series(rows, **{"pass": "fwd", "head_dim": h, "mask": m})
        cudnn = series(peer_rows, impl="sdpa_cudnn", pass_="fwd", head_dim=h, mask=m)
        flash = series(peer_rows, impl="sdpa_flash", pass_="fwd", head_dim=h, mask=m, deterministic=False)
        print(f"| {key} | {cells(mine)} | {cells(anchors['fwd'][key])} | {cells(cudnn)} | {cells(flash)} | "
              f"{ratios(mine, anchors['fwd'][key])} | {ratios(mine, cudnn)} |")
    print("\n### Backward (TFLOPS, seqlen 512 1k 2k 4k 8k 16k)\n")
    print("| hdim, mask | ours atomic | ours auto (det.) | FA3 non-det. | FA3 det. | SDPA cuDNN (non-det.) | SDPA flash det. "
          "| atomic % of FA3 non-det. | auto % of our atomic | auto % of FA3 det. |\n|---|---|---|---|---|---|---|---|---|---|")
    for h, m in configs:
        key = f"{h} {m}"
        atomic = series(rows, **{"pass": "bwd", "schedule": "atomic", "head_dim": h, "mask": m})
        auto = series(rows, **{"pass": "bwd", "schedule": "auto", "head_dim": h, "mask": m})
        cudnn = series(peer_rows, impl="sdpa_cudnn", pass_="bwd", head_dim=h, mask=m)
        flash_det = series(peer_rows, impl="sdpa_flash", pass_="bwd", head_dim=h, mask=m, deterministic=True)
        print(f"| {key} | {cells(atomic)} | {cells(auto)} | {cells(anchors['bwd_nondeterministic'][key])} | "
              f"{cells(anchors['bwd_deterministic'][key])} | {cells(cudnn)} | {cells(flash_det)} | "
              f"{ratios(atomic, anchors['bwd_nondeterministic'][key])} | {ratios(auto, atomic)} | "
              f"{ratios(auto, anchors['bwd_deterministic'][key])} |")
    print("\n### Backward per schedule (TFLOPS, seqlen 512 1k 2k 4k 8k 16k)\n")
    print("| hdim, mask | atomic | fa3 | descending | shift | symmetric_shift | auto |\n|---|---|---|---|---|---|---|")
    for h, m in configs:
        per = [series(rows, **{"pass": "bwd", "schedule": s, "head_dim": h, "mask": m})
               for s in ("atomic", "fa3", "descending", "shift", "symmetric_shift", "auto")]
        print(f"| {h} {m} | " + " | ".join(" ".join("-" if v is None else f"{v:.0f}" for v in p) for p in per) + " |")


if __name__ == "__main__":
    main()
