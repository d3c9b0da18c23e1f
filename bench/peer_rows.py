"""Rows of the peer benchmark, without torch: FLOP counts, implementation
names and labels, statuses, and each row's ratio to the best peer of its
shape and pass. bench/peers.py writes these rows; the table and plot
generators read them; tests/python checks them on the CPU."""
import re

PASSES = ("fwd", "bwd")
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
DASH = "dash_attn"

# Every implementation the benchmarks know, with the deterministic settings
# measured by default (True: its deterministic mode). Order = run order.
IMPL_MODES = {
    "dash_attn": (True, False),       # deterministic=True (schedule auto) and False (atomic dQ)
    "sdpa_flash": (False, True),      # SDPA backends; True = torch.use_deterministic_algorithms(True)
    "sdpa_cudnn": (False, True),
    "sdpa_efficient": (False, True),
    "sdpa_default": (False,),         # SDPA's own backend choice (the end-to-end block)
    "flex": (False,),                 # torch.compile(flex_attention); no deterministic switch
    "fa2": (False, True),             # flash_attn.flash_attn_func(deterministic=...)
    "fa3": (False, True),             # flash_attn_interface.flash_attn_func(deterministic=...)
}
PEERS_DEFAULT = ("dash_attn", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex", "fa2", "fa3")

_NAMES = {"dash_attn": "dash_attn", "sdpa_flash": "SDPA flash", "sdpa_cudnn": "SDPA cuDNN",
          "sdpa_efficient": "SDPA efficient", "sdpa_default": "SDPA default", "flex": "FlexAttention",
          "fa2": "FA2", "fa3": "FA3"}

# The columns of the CSV file and of the JSON rows, in this order.
ROW_FIELDS = ("impl", "label", "pass", "deterministic", "schedule", "head_dim", "mask", "seqlen", "batch", "heads",
              "median_ms", "min_ms", "max_ms", "tflops", "status", "max_error", "error_ratio", "verified", "bitwise",
              "max_abs_diff_dq", "max_abs_diff_dk", "max_abs_diff_dv", "best_peer", "ratio_to_best_peer",
              "best_det_peer", "ratio_to_best_det_peer", "warmup_s", "host_bound_reps", "notes")


def exit_status(failures, skipped):
    """Prints what fails a run (messages about dash_attn rows, dash_attn not
    measured at all) and returns the process exit status."""
    for message in failures:
        print(f"!! {message}", flush=True)
    if DASH in skipped:
        print(f"!! dash_attn was not measured: {skipped[DASH]}", flush=True)
    return 1 if failures or DASH in skipped else 0


def label(impl, deterministic):
    """A readable name for one (implementation, mode): dash_attn's
    non-deterministic mode is its atomic-dQ backward."""
    name = _NAMES.get(impl, impl)
    if impl == DASH:
        return f"{name} det." if deterministic else f"{name} atomic"
    return f"{name} det." if deterministic else name


def parse_variants(spec, default_impls):
    """--impls: comma-separated NAME (every mode in IMPL_MODES), NAME:det or
    NAME:nondet. Returns [(impl, deterministic)] in the order given."""
    names = [s.strip() for s in spec.split(",") if s.strip()] if spec else list(default_impls)
    variants = []
    for item in names:
        impl, _, mode = item.partition(":")
        if impl not in IMPL_MODES:
            raise ValueError(f"--impls: unknown implementation {impl!r}; known: {', '.join(IMPL_MODES)}")
        if mode == "":
            modes = IMPL_MODES[impl]
        elif mode in ("det", "nondet"):
            modes = (mode == "det",)
        else:
            raise ValueError(f"--impls: {item!r}: the mode after ':' is 'det' or 'nondet'")
        variants += [(impl, m) for m in modes if (impl, m) not in variants]
    return variants


def attention_flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal, pass_):
    """The papers' convention: forward 4*b*h*s_q*s_k*d, half for causal;
    backward 2.5x forward."""
    forward = 4 * batch * heads * seqlen_q * seqlen_k * head_dim / (2 if causal else 1)
    return forward if pass_ == "fwd" else 2.5 * forward


def tflops(flops, milliseconds):
    return flops / (milliseconds * 1e9)


def warning_line(text):
    """A warning's first line without torch's '(Triggered internally at
    file:line.)' suffix."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return re.sub(r"\s*\(Triggered internally at [^)]*\)\s*$", "", line)


def status_from_error(error_type, message, warning_messages=()):
    """'unsupported: <reason>' when an implementation refuses the shape or the
    deterministic mode (SDPA's 'No available kernel' names its reasons only in
    warnings, so those are appended), else 'error: <message>'."""
    first = (message or "").strip().splitlines()[0] if (message or "").strip() else error_type
    refused = error_type in ("NotImplementedError", "ValueError") or any(key in first for key in (
        "No available kernel", "No viable backend", "deterministic", "not supported", "does not support",
        "only supports", "nsupported", "not implemented"))
    reasons = []
    for text in warning_messages:
        line = warning_line(text)
        # SDPA also explains why every backend the caller switched off was not used.
        noise = "runtime disabled" in line or line.endswith("not used because:")
        if line and not noise and line not in reasons and line != first:
            reasons.append(line)
    detail = f"{first} ({'; '.join(reasons)})" if reasons and refused else first
    return f"{'unsupported' if refused else 'error'}: {detail[:400]}"


def status_kind(status):
    return (status or "ok").split(":", 1)[0]


def is_ok(row):
    return status_kind(row.get("status")) == "ok" and row.get("tflops") is not None


def shape_key(row):
    return (row["head_dim"], row["mask"], row["seqlen"], row["pass"])


def annotate_best_peer(rows):
    """Adds to every ok row its ratio to the best peer (the fastest non-dash
    implementation of that shape and pass, any mode) and to the best
    deterministic peer (run in deterministic mode and, for the backward,
    bitwise equal over its rerun). Ratios are TFLOPS / peer TFLOPS."""
    groups = {}
    for row in rows:
        groups.setdefault(shape_key(row), []).append(row)
    for group in groups.values():
        peers = [r for r in group if is_ok(r) and r["impl"] != DASH]
        det_peers = [r for r in peers if r["deterministic"] and (r["pass"] == "fwd" or r.get("bitwise") is True)]
        for prefix, pool in (("best_peer", peers), ("best_det_peer", det_peers)):
            best = max(pool, key=lambda r: r["tflops"]) if pool else None
            for row in group:
                ok = best is not None and is_ok(row)
                row[prefix] = best["label"] if ok else None
                row["ratio_to_" + prefix] = row["tflops"] / best["tflops"] if ok else None
    return rows


def normalize_row(row):
    """Rows of the first SDPA-only script (bench/results/*sdpa_peers*.json)
    read like new ones: 'pass_' -> 'pass', 'error' -> status."""
    row = dict(row)
    if "pass_" in row:
        row["pass"] = row.pop("pass_")
    if "error" in row:
        row["status"] = status_from_error("RuntimeError", row.pop("error"))
    row.setdefault("status", "ok")
    row.setdefault("label", label(row["impl"], row.get("deterministic", False)))
    return row


def load_peers(document):
    """A peers JSON document (parsed) with normalized rows; rows of a refused
    mode carry pass '-' in the old format and are kept for both passes."""
    rows = []
    for raw in document.get("rows", []):
        row = normalize_row(raw)
        if row.get("pass") in (None, "-"):
            rows += [dict(row, **{"pass": p}) for p in PASSES]
        else:
            rows.append(row)
    return dict(document, rows=rows)


def series(rows, seqlens=SEQLENS, field="tflops", **match):
    """Values of `field` at each seqlen for the ok rows matching every
    key=value given; None where no such row."""
    found = {r["seqlen"]: r.get(field) for r in rows
             if is_ok(r) and all(r.get(k) == v for k, v in match.items())}
    return [found.get(s) for s in seqlens]


def standard_grid_rows(rows, total_tokens=16384, hidden=2048):
    """The rows of the standard grid: dash-bench JSON can also hold chosen
    shapes (--shape: GQA, other batches, seqlen_q != seqlen_k) that would
    otherwise land in the same table cell. Fields a row lacks are not checked."""
    def fits(r):
        heads = r.get("heads_q", r.get("heads"))
        return (r.get("heads_kv", heads) == heads and r.get("seqlen_q", r["seqlen"]) == r.get("seqlen_k", r["seqlen"])
                and (r.get("batch") is None or r["batch"] * r["seqlen"] == total_tokens)
                and (heads is None or heads * r["head_dim"] == hidden))
    return [r for r in rows if fits(r)]


def variants_in(rows, pass_):
    """(impl, deterministic) pairs with at least one ok row of that pass, in
    first-seen order."""
    seen = []
    for r in rows:
        key = (r["impl"], bool(r.get("deterministic")))
        if r.get("pass") == pass_ and is_ok(r) and key not in seen:
            seen.append(key)
    return seen
