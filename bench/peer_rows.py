"""Rows of the peer benchmark, without torch: the set of shapes measured (row
groups), FLOP counts, implementation names and labels, statuses, each row's
ratio to the best peer of its shape and pass, and the flat records of
bench/results/latest_peers.json. bench/peers.py writes these rows; the table
and plot generators read them; tests/python checks them on the CPU."""
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
    "fa4": (False, True),             # flash_attn.cute.flash_attn_func(deterministic=...) (FlashAttention-4)
    "cudnn": (False, True),           # torch.ops.cudnn.sdpa_fwd/sdpa_bwd(is_deterministic=...) (cudnn-frontend)
}
PEERS_DEFAULT = ("dash_attn", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex", "fa2", "fa3", "fa4", "cudnn")

_NAMES = {"dash_attn": "dash_attn", "sdpa_flash": "SDPA flash", "sdpa_cudnn": "SDPA cuDNN",
          "sdpa_efficient": "SDPA efficient", "sdpa_default": "SDPA default", "flex": "FlexAttention",
          "fa2": "FA2", "fa3": "FA3", "fa4": "FA4", "cudnn": "cuDNN frontend"}

# How a row's passes were called (the row's "protocol"): "autograd" = the
# forward through the implementation's autograd function, the backward
# torch.autograd.grad on its graph; "direct_op" = forward and backward are
# direct calls of the implementation's ops (cuDNN frontend: sdpa_fwd, then
# sdpa_bwd on the saved output and LSE), no autograd.
PROTOCOLS = ("autograd", "direct_op")

# The columns of the CSV file and of the JSON rows, in this order.
ROW_FIELDS = ("impl", "label", "pass", "deterministic", "schedule", "head_dim", "mask", "seqlen", "batch", "heads",
              "heads_kv", "median_ms", "min_ms", "max_ms", "tflops", "status", "max_error", "error_ratio", "verified",
              "bitwise", "max_abs_diff_dq", "max_abs_diff_dk", "max_abs_diff_dv", "best_peer", "ratio_to_best_peer",
              "best_det_peer", "ratio_to_best_det_peer", "warmup_s", "host_bound_reps", "row_group", "protocol",
              "notes")

# The row groups bench/peers.py measures (--rows); the default is the first
# three, "all" adds score_mods.
# standard: the standard grid (hdim 64 and 128, full and causal, seqlen
#   512..16k, batch = total tokens / seqlen, heads = hidden / head_dim);
# gqa: 32 q heads on 8 kv heads, hdim 128, causal, seqlen 4k, 8k, 16k at 16k
#   tokens (batch 4, 2, 1): Llama-3-8B's attention;
# hdim256: hdim 256, 8 heads, seqlen 4k, batch 4, full and causal (the
#   standard grid's cell at hdim 256 and 4k);
# score_mods: the sliding-window, softcap and sink rows of the models that use
#   them (SCORE_MOD_SHAPES), each shape with its own mods.
ROW_GROUPS = ("standard", "gqa", "hdim256", "score_mods")
DEFAULT_ROW_GROUPS = ROW_GROUPS[:3]
STANDARD_HDIMS = (64, 128)
MASKS = ("full", "causal")
TOTAL_TOKENS, HIDDEN = 16384, 2048
GQA_SHAPE = dict(head_dim=128, heads_q=32, heads_kv=8, masks=("causal",), seqlens=(4096, 8192, 16384))
HDIM256_SHAPE = dict(head_dim=256, masks=("full", "causal"), seqlens=(4096,))
# (model, head_dim, q heads, kv heads, [(seqlen, batch)], window (left, right), softcap, sinks), all causal.
# Mistral 7B v0.1: window 4096 at 16k and 32k; Gemma 2 9B: softcap 50 and window 4096 (its local layers) at
# 16k tokens; GPT-OSS 20B: 64/8 heads of 64 with learnable sinks (its global layers) at 16k tokens.
SCORE_MOD_SHAPES = (
    ("mistral", 128, 32, 8, ((16384, 1), (32768, 1)), (4096, 0), 0.0, False),
    ("gemma2", 256, 16, 8, ((4096, 4), (8192, 2)), (4096, 0), 50.0, False),
    ("gptoss", 64, 64, 8, ((4096, 4),), (-1, -1), 0.0, True),
)


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


def parse_row_groups(spec):
    """--rows: comma-separated group names (or 'all'), in the order given."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names == ["all"]:
        return list(ROW_GROUPS)
    unknown = [n for n in names if n not in ROW_GROUPS]
    if unknown or not names:
        raise ValueError(f"--rows: unknown row group(s) {', '.join(map(repr, unknown)) or 'none given'}; "
                         f"known: {', '.join(ROW_GROUPS)} or all")
    return list(dict.fromkeys(names))


def shape(group, head_dim, mask, seqlen, batch, heads_q, heads_kv=None, mods=None):
    """One problem of the run: the fields every row of it carries; mods =
    (window, softcap, sinks) for a shape with its own score mods."""
    fields = {"row_group": group, "head_dim": head_dim, "mask": mask, "seqlen": seqlen, "batch": batch,
              "heads": heads_q, "heads_kv": heads_q if heads_kv is None else heads_kv}
    if mods is not None:
        fields.update(window=tuple(mods[0]), softcap=float(mods[1]), sinks=bool(mods[2]))
    return fields


def shape_identity(s):
    """What makes two shapes the same problem, whatever group named them."""
    return (s["head_dim"], s["mask"], s["seqlen"], s["batch"], s["heads"], s["heads_kv"], s.get("window"),
            s.get("softcap"), s.get("sinks"))


def grid_shapes(group, hdims, masks, seqlens, total_tokens=TOTAL_TOKENS, hidden=HIDDEN):
    """The grid's shapes, hdim-major then mask then seqlen: batch = total
    tokens / seqlen, heads = hidden / head_dim (q and kv)."""
    return [shape(group, h, m, s, total_tokens // s, hidden // h) for h in hdims for m in masks for s in seqlens]


def row_set(groups, hdims=STANDARD_HDIMS, masks=MASKS, seqlens=SEQLENS, total_tokens=TOTAL_TOKENS, hidden=HIDDEN):
    """The shapes of a run, group after group. hdims, seqlens, total_tokens and
    hidden shape the standard group; masks filters every group. A shape that
    two groups name is measured once, under the first."""
    shapes = []
    for group in groups:
        if group == "standard":
            shapes += grid_shapes(group, hdims, masks, seqlens, total_tokens, hidden)
        elif group == "gqa":
            g = GQA_SHAPE
            shapes += [shape(group, g["head_dim"], m, s, TOTAL_TOKENS // s, g["heads_q"], g["heads_kv"])
                       for m in g["masks"] if m in masks for s in g["seqlens"]]
        elif group == "hdim256":
            g = HDIM256_SHAPE
            shapes += grid_shapes(group, (g["head_dim"],), [m for m in g["masks"] if m in masks], g["seqlens"])
        elif group == "score_mods":
            shapes += [shape(group, hdim, "causal", seqlen, batch, hq, hkv, (window, softcap, sinks))
                       for _, hdim, hq, hkv, sizes, window, softcap, sinks in SCORE_MOD_SHAPES if "causal" in masks
                       for seqlen, batch in sizes]
        else:
            raise ValueError(f"unknown row group {group!r}; known: {', '.join(ROW_GROUPS)}")
    unique = {}
    for s in shapes:
        unique.setdefault(shape_identity(s), s)
    return list(unique.values())


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


def heads_q(row):
    return row.get("heads_q", row.get("heads"))


def is_gqa(row):
    """Fewer kv heads than q heads (rows without the fields are not)."""
    return row.get("heads_kv", heads_q(row)) != heads_q(row)


def shape_key(row):
    """Rows of one problem and pass (fields a row lacks read as None; score
    mods make another problem)."""
    return (row["head_dim"], row["mask"], row["seqlen"], row.get("batch"), heads_q(row),
            row.get("heads_kv", heads_q(row)), row["pass"], row.get("score_mods"))


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


def series(rows, seqlens=SEQLENS, field="tflops", gqa=False, **match):
    """Values of `field` at each seqlen for the ok rows matching every
    key=value given; None where no such row. GQA rows (heads_kv < heads) are
    left out unless gqa=True: they share (hdim, mask, seqlen) with cells of
    the standard grid."""
    match.setdefault("score_mods", None)  # rows with score mods only when asked for by name
    found = {r["seqlen"]: r.get(field) for r in rows
             if is_ok(r) and is_gqa(r) == gqa and all(r.get(k) == v for k, v in match.items())}
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


# The fields of every record of bench/results/latest_peers.json, in this order.
LATEST_FIELDS = ("impl", "label", "deterministic", "pass", "hdim", "causal", "seqlen", "batch", "heads_q", "heads_kv",
                 "tflops", "median_ms", "min_ms", "max_ms", "status", "verified", "error_ratio", "bitwise_rerun",
                 "protocol", "row_group", "score_mods", "best_peer", "ratio_to_best_peer", "best_det_peer",
                 "ratio_to_best_det_peer", "device", "commit", "date")


def latest_record(row, commit, date, device=None):
    """One row as a flat record of latest_peers.json: tflops and the timings
    are None unless the row was measured (status ok); bitwise_rerun is the
    backward's rerun check (None for the forward and unmeasured rows)."""
    ok = is_ok(row)
    rerun = row.get("bitwise") if row["pass"] == "bwd" and ok else None
    record = {"impl": row["impl"], "label": row.get("label") or label(row["impl"], row.get("deterministic", False)),
              "deterministic": bool(row.get("deterministic")), "pass": row["pass"], "hdim": int(row["head_dim"]),
              "causal": row["mask"] == "causal", "seqlen": int(row["seqlen"]),
              "batch": None if row.get("batch") is None else int(row["batch"]),
              "heads_q": None if heads_q(row) is None else int(heads_q(row)),
              "heads_kv": None if row.get("heads_kv", heads_q(row)) is None else int(row.get("heads_kv", heads_q(row))),
              "status": row.get("status") or "ok", "verified": row.get("verified"),
              "error_ratio": row.get("error_ratio"), "bitwise_rerun": None if rerun is None else bool(rerun),
              "protocol": row.get("protocol"), "row_group": row.get("row_group", "standard"),
              "score_mods": row.get("score_mods"),
              "device": device, "commit": commit, "date": date}
    for field in ("tflops", "median_ms", "min_ms", "max_ms"):
        record[field] = float(row[field]) if ok and row.get(field) is not None else None
    for field in ("best_peer", "ratio_to_best_peer", "best_det_peer", "ratio_to_best_det_peer"):
        record[field] = row.get(field)
    return {field: record[field] for field in LATEST_FIELDS}


def latest_records(document):
    """The rows of a peers document as latest_peers.json's list of records."""
    return [latest_record(r, document.get("commit"), document.get("date"), document.get("device"))
            for r in document.get("rows", [])]
