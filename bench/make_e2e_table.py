"""A markdown table from bench/e2e_block.py's JSON: per seqlen and attention
implementation, the block's forward + backward step time, the attention's own
time and share of the step, the step time relative to SDPA and to dash_attn's
atomic mode, and the bitwise rerun results.

    python3 bench/make_e2e_table.py E2E.json > e2e.md
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import e2e_rows  # noqa: E402


def _percent(value):
    return "-" if value is None else f"{100 * value:.1f}"


def _bitwise(value):
    return "-" if value is None else ("equal" if value else "differ")


def render(document):
    block = document.get("block", {})
    out = [f"Block: hidden {block.get('hidden')}, {block.get('heads')} q heads / {block.get('kv_heads')} kv heads, "
           f"head_dim {block.get('head_dim')}, MLP {block.get('intermediate')}, bf16, causal, "
           f"batch {document.get('batch')}; {document.get('device')}, driver {document.get('driver')}, "
           f"torch {document.get('torch')}, CUDA {document.get('cuda')}, cuDNN {document.get('cudnn')}; "
           f"commit {document.get('commit')}, {document.get('date')}; median (min-max) of "
           f"{document.get('repetitions')} steps after {document.get('warmup')} warm-up steps.",
           "",
           "Time columns in %: this step's median time / the baseline's (below 100: faster). Bitwise: the step "
           "(all gradients) and the attention alone, each run twice on the same inputs. Output diff: the block's "
           "output against the same block with SDPA; rounding differences are expected, a wrong attention shows "
           "differences of the output's own size (inputs are standard normal).", ""]
    header = ["seqlen", "implementation", "step ms", "step TFLOPS", "attention ms", "attention share %",
              "step % of SDPA default", "step % of dash_attn atomic", "bitwise step / attention",
              "output max diff vs SDPA"]
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in e2e_rows.annotate([dict(r) for r in document.get("rows", [])]):
        label = row["label"] + (f" ({row['sdpa_backend']})" if row.get("sdpa_backend") else "")
        if not e2e_rows.is_step_ok(row):
            out.append(f"| {row['seqlen']} | {label} | {row.get('status')} |" + " |" * (len(header) - 3))
            continue
        out.append(" ".join([
            f"| {row['seqlen']} | {label} |",
            f"{row['step_median_ms']:.2f} ({row['step_min_ms']:.2f}-{row['step_max_ms']:.2f}) |",
            f"{row['step_tflops']:.0f} |" if row.get("step_tflops") else "- |",
            f"{row['attn_median_ms']:.2f} |" if row.get("attn_median_ms") else "- |",
            f"{_percent(row.get('attn_share'))} |",
            f"{_percent(row.get('step_time_vs_sdpa'))} |",
            f"{_percent(row.get('step_time_vs_dash_atomic'))} |",
            f"{_bitwise(row.get('bitwise'))} / {_bitwise(row.get('attn_bitwise'))} |",
            "- |" if row.get("out_max_diff_vs_sdpa") is None else f"{row['out_max_diff_vs_sdpa']:.2g} |"]))
    skipped = document.get("skipped") or {}
    out += [""] + [f"- not measured: {name}: {reason}" for name, reason in skipped.items()]
    return "\n".join(out).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("e2e", help="bench/e2e_block.py JSON")
    args = parser.parse_args(argv)
    sys.stdout.write(render(json.load(open(args.e2e))))


if __name__ == "__main__":
    main()
