#!/usr/bin/env python3
"""Where a kernel's steady loop spends its instructions and cycles, from ncu's
per-instruction SASS counters, so two kernels (ours and a peer's) can be set
side by side (docs/gpu_workflow.md, "ncu beside a peer").

On the GPU machine:
    ncu --clock-control none --profile-from-start off --set full -o REP python3 one_call.py
    ncu --import REP.ncu-rep --page source --csv --print-source sass > REP_sass.csv
Here:
    python3 scripts/ncu_sass_phases.py REP_sass.csv KERNEL_SUBSTRING CYCLES_PER_STEP

The steady loop is the set of instructions that share one execution count
(once per warp and step) and execute the most instructions in total. For it the script prints the instructions per step by opcode and
the loop cut into phases at every wait (wgmma wait, mbarrier wait, named
barrier) with the share of the warps' stall samples each phase takes, scaled
to CYCLES_PER_STEP (elapsed cycles x SMs / steps, from the details page).
"""
import argparse
import collections
import csv
import re


def kernels(path):
    """{kernel name: [instruction rows]} of an ncu source-page CSV."""
    out, name, header = collections.OrderedDict(), None, None
    for row in csv.reader(open(path, newline="")):
        if not row:
            continue
        if row[0] == "Kernel Name":
            name, header = row[1], None
            out[name] = []
        elif row[0] == "Address":
            header = row
        elif header and name:
            out[name].append(dict(zip(header, row)))
    return out


def opcode(source):
    return re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split()[0].split(".")[0]


def count(row, key):
    return int((row.get(key) or "0").replace(",", "") or 0)


def is_wait(source):
    s = source.strip()
    return "WARPGROUP.DEPBAR" in s or "SYNCS.PHASECHK" in s or "BAR.SYNC" in s or "BAR.ARV" in s


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("kernel", help="substring of the kernel's name")
    parser.add_argument("cycles_per_step", type=float)
    args = parser.parse_args()
    found = kernels(args.csv)
    name = next(k for k in found if args.kernel in k)
    rows = found[name]
    # The loop's instructions share one execution count and execute the most in total.
    per_count = collections.Counter(count(r, "Instructions Executed") for r in rows)
    steady = max(per_count, key=lambda c: c * per_count[c])
    loop = [(i, r) for i, r in enumerate(rows) if count(r, "Instructions Executed") == steady]
    samples = sum(count(r, "Warp Stall Sampling (All Samples)") for _, r in loop) or 1
    print(f"{name[:100]}\nsteady loop: {len(loop)} instructions per warp per step ({steady} executions each)")
    ops = collections.Counter(opcode(r["Source"]) for _, r in loop)
    print("by opcode:", ", ".join(f"{o} {n}" for o, n in ops.most_common(24)))
    phase, first = [], None
    for i, r in loop:
        phase.append(r)
        first = i if first is None else first
        if is_wait(r["Source"]):
            share = sum(count(x, "Warp Stall Sampling (All Samples)") for x in phase) / samples
            mix = collections.Counter(opcode(x["Source"]) for x in phase).most_common(5)
            print(f"  [{first:5d}-{i:5d}] {len(phase):4d} instr {share * args.cycles_per_step:7.0f} cycles  "
                  f"ends {r['Source'].strip()[:40]:40s} {dict(mix)}")
            phase, first = [], None
    if phase:
        share = sum(count(x, "Warp Stall Sampling (All Samples)") for x in phase) / samples
        print(f"  [tail] {len(phase):4d} instr {share * args.cycles_per_step:7.0f} cycles")


if __name__ == "__main__":
    main()
