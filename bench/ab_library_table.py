"""Table of an A/B of C ABI libraries (scripts/ab_library.sh): TFLOPS of every
row for each variant, averaged over the rounds, each variant's ratio to the
first one named, and the spread between rounds (max / min - 1).

    python3 bench/ab_library_table.py AB_DIR NAME [NAME ...]
"""
import argparse
import collections
import json
import pathlib
import statistics

BENCHES = ("peers", "varlen_vs_fixed")  # scripts/ab_library.sh's BENCH


def row_key(bench, row):
    """The shape of one row: peers.py's and varlen_vs_fixed.py's fields."""
    if bench == "peers":
        heads = f"{row['heads']}/{row['heads_kv']}"
        return (row["pass"], row["head_dim"], row["mask"], row["seqlen"], heads, row["label"])
    mask = "causal" if row["causal"] else "full"
    return (row["pass_name"], row["hdim"], mask, row["seqlen"], row["kind"])


def collect(directory, names):
    """{bench: {row key: {name: [TFLOPS per round]}}}."""
    table = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for path in sorted(pathlib.Path(directory).glob("*.json")):
        bench = next((b for b in BENCHES if path.stem.startswith(b + "_")), None)  # BENCH_NAME.ROUND
        name = path.stem[len(bench) + 1:].rsplit(".", 1)[0] if bench else None
        if name not in names:
            continue
        for row in json.loads(path.read_text())["rows"]:
            if row.get("tflops") is not None:
                table[bench][row_key(bench, row)][name].append(row["tflops"])
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()
    for bench, rows in collect(args.directory, args.names).items():
        print(f"\n{bench}: TFLOPS ({' '.join(args.names)}), ratio to {args.names[0]}, spread")
        for key in sorted(rows):
            means = [statistics.mean(rows[key][n]) if rows[key][n] else float("nan") for n in args.names]
            spreads = [max(rows[key][n]) / min(rows[key][n]) - 1 if rows[key][n] else float("nan") for n in args.names]
            print(" ".join(map(str, key)).ljust(52), " ".join(f"{m:7.1f}" for m in means), " |",
                  " ".join(f"{m / means[0]:.3f}" for m in means[1:]), " |", " ".join(f"{s:.1%}" for s in spreads))


if __name__ == "__main__":
    main()
