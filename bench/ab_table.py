"""Markdown table of an A/B call (scripts/ab_backward.sh): the TFLOPS of every
dash-bench row (backward rows by schedule; forward rows, with --passes fwd,bwd,
under the schedule "fwd") for each variant, averaged over the rounds, and each
variant's ratio to the first one named.

    python3 bench/ab_table.py AB_DIR NAME [NAME ...] > ab.md
"""
import argparse
import pathlib
import re
import sys

# impl pass schedule det shape mask ms TFLOPS ... (dash-bench's table rows); the mask is
# full or causal, then " window L,R" and " softcap X" with dash-bench's --window / --softcap.
ROW = re.compile(r"dash_attn (fwd|bwd)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+(?: window \S+)?(?: softcap \S+)?)\s+\S+\s+(\S+)")


def parse_log(text):
    """{(shape, mask, schedule): TFLOPS} of the backward rows of one log."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            pass_, schedule, shape, mask, tflops = m.groups()
            rows[(shape, mask, schedule if pass_ == "bwd" else "fwd")] = float(tflops)
    return rows


def mean_rows(logs):
    """Per-row mean over the logs that have the row."""
    sums, counts = {}, {}
    for rows in logs:
        for key, value in rows.items():
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def table(means, names):
    first = means[names[0]]
    lines = ["| shape | mask | schedule | " + " | ".join(names) + " | " +
             " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |",
             "|---|---|---|" + "---|" * (2 * len(names) - 1)]
    for key in first:
        values = [means[n].get(key) for n in names]
        cells = ["-" if v is None else f"{v:.1f}" for v in values]
        ratios = ["-" if v is None else f"{v / values[0]:.3f}" for v in values[1:]]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ab_dir", type=pathlib.Path)
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()
    means = {}
    for name in args.names:
        logs = [parse_log(p.read_text()) for p in sorted(args.ab_dir.glob(f"{name}.*.log"))]
        if not logs:
            sys.exit(f"no logs for {name} in {args.ab_dir}")
        means[name] = mean_rows(logs)
    print(table(means, args.names))


if __name__ == "__main__":
    main()
