"""The benchmark scripts' pure logic (bench/peer_rows.py, e2e_rows.py,
result_files.py) without torch or a GPU (CI). Every number here is synthetic,
made up for the test: these are no results."""
import csv
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import e2e_rows  # noqa: E402
import peer_rows  # noqa: E402
import result_files  # noqa: E402


def row(impl, deterministic, tflops, pass_="fwd", status="ok", bitwise=None, seqlen=1024, head_dim=128, mask="full"):
    return {"impl": impl, "label": peer_rows.label(impl, deterministic), "deterministic": deterministic,
            "pass": pass_, "tflops": tflops, "status": status, "bitwise": bitwise, "seqlen": seqlen,
            "head_dim": head_dim, "mask": mask}


def test_flops_follow_the_papers_convention():
    full = peer_rows.attention_flops(2, 16, 1024, 1024, 128, False, "fwd")
    assert full == 4 * 2 * 16 * 1024 * 1024 * 128
    assert peer_rows.attention_flops(2, 16, 1024, 1024, 128, True, "fwd") == full / 2
    assert peer_rows.attention_flops(2, 16, 1024, 1024, 128, False, "bwd") == 2.5 * full
    assert peer_rows.tflops(2e12, 2.0) == pytest.approx(1000.0)


def test_variants_parse_names_and_modes():
    assert peer_rows.parse_variants("", ("dash_attn", "flex")) == [("dash_attn", True), ("dash_attn", False),
                                                                   ("flex", False)]
    assert peer_rows.parse_variants("sdpa_cudnn:nondet, sdpa_flash:det,sdpa_cudnn", ()) == [
        ("sdpa_cudnn", False), ("sdpa_flash", True), ("sdpa_cudnn", True)]
    with pytest.raises(ValueError, match="unknown implementation 'fa5'"):
        peer_rows.parse_variants("fa5", ())
    assert peer_rows.parse_variants("fa4,cudnn:det", ()) == [("fa4", False), ("fa4", True), ("cudnn", True)]
    with pytest.raises(ValueError, match="'det' or 'nondet'"):
        peer_rows.parse_variants("fa2:maybe", ())


def test_labels_name_dash_modes_by_their_backward():
    assert peer_rows.label("dash_attn", True) == "dash_attn det."
    assert peer_rows.label("dash_attn", False) == "dash_attn atomic"
    assert peer_rows.label("sdpa_cudnn", False) == "SDPA cuDNN"
    assert peer_rows.label("sdpa_flash", True) == "SDPA flash det."
    assert peer_rows.label("fa4", False) == "FA4" and peer_rows.label("fa4", True) == "FA4 det."
    assert peer_rows.label("cudnn", True) == "cuDNN frontend det."


def test_fa4_and_cudnn_frontend_run_by_default_in_both_modes():
    variants = peer_rows.parse_variants("", peer_rows.PEERS_DEFAULT)
    for impl in ("fa4", "cudnn"):
        assert (impl, False) in variants and (impl, True) in variants
    assert variants[:2] == [("dash_attn", True), ("dash_attn", False)]


def test_default_row_set_is_the_standard_grid_plus_gqa_and_hdim256():
    shapes = peer_rows.row_set(peer_rows.DEFAULT_ROW_GROUPS)
    standard = [s for s in shapes if s["row_group"] == "standard"]
    assert len(standard) == 2 * 2 * 6
    assert all(s["batch"] * s["seqlen"] == 16384 and s["heads"] * s["head_dim"] == 2048 == s["heads_kv"] * s["head_dim"]
               for s in standard)
    gqa = [(s["head_dim"], s["mask"], s["seqlen"], s["batch"], s["heads"], s["heads_kv"])
           for s in shapes if s["row_group"] == "gqa"]
    assert gqa == [(128, "causal", 4096, 4, 32, 8), (128, "causal", 8192, 2, 32, 8), (128, "causal", 16384, 1, 32, 8)]
    hdim256 = [(s["head_dim"], s["mask"], s["seqlen"], s["batch"], s["heads"], s["heads_kv"])
               for s in shapes if s["row_group"] == "hdim256"]
    assert hdim256 == [(256, "full", 4096, 4, 8, 8), (256, "causal", 4096, 4, 8, 8)]
    assert len(shapes) == 24 + 3 + 2


def test_score_mod_rows_carry_their_models_mods_and_stay_apart_from_plain_shapes():
    shapes = peer_rows.row_set(peer_rows.parse_row_groups("all"))
    mods = [(s["head_dim"], s["seqlen"], s["batch"], s["heads"], s["heads_kv"], s["window"], s["softcap"], s["sinks"])
            for s in shapes if s["row_group"] == "score_mods"]
    assert mods == [(128, 16384, 1, 32, 8, (4096, 0), 0.0, False), (128, 32768, 1, 32, 8, (4096, 0), 0.0, False),
                    (256, 4096, 4, 16, 8, (4096, 0), 50.0, False), (256, 8192, 2, 16, 8, (4096, 0), 50.0, False),
                    (64, 4096, 4, 64, 8, (-1, -1), 0.0, True)]
    assert all(s["mask"] == "causal" for s in shapes if s["row_group"] == "score_mods")
    # The Mistral 16k row has the GQA group's dimensions; its window makes it another problem.
    assert len(shapes) == 24 + 3 + 2 + 5
    assert peer_rows.row_set(["score_mods"], masks=("full",)) == []
    record = peer_rows.latest_record(dict(shapes[-1], impl="dash_attn", deterministic=True, status="ok", tflops=1.0,
                                          median_ms=1.0, min_ms=1.0, max_ms=1.0, score_mods="sinks", **{"pass": "fwd"}),
                                     "abc", "2026-12-02")
    assert record["score_mods"] == "sinks" and record["row_group"] == "score_mods"


def test_row_groups_select_filter_and_deduplicate():
    assert peer_rows.parse_row_groups("gqa, hdim256,gqa") == ["gqa", "hdim256"]
    with pytest.raises(ValueError, match="unknown row group"):
        peer_rows.parse_row_groups("gqa,mqa")
    assert [s["row_group"] for s in peer_rows.row_set(["gqa", "hdim256"])] == ["gqa"] * 3 + ["hdim256"] * 2
    assert peer_rows.row_set(["gqa"], masks=("full",)) == []
    assert [s["mask"] for s in peer_rows.row_set(["hdim256"], masks=("causal",))] == ["causal"]
    # The standard grid at hdim 256 and 4k is the hdim256 group's shape: measured once, under the first group.
    both = peer_rows.row_set(["standard", "hdim256"], hdims=(256,), seqlens=(4096,))
    assert [(s["row_group"], s["mask"]) for s in both] == [("standard", "full"), ("standard", "causal")]
    quick = peer_rows.row_set(["standard"], hdims=(32,), masks=("full",), seqlens=(64, 128), total_tokens=256,
                              hidden=64)
    assert [(s["batch"], s["heads"], s["heads_kv"]) for s in quick] == [(4, 2, 2), (2, 2, 2)]


def test_refusals_are_unsupported_with_the_reasons_sdpa_gives_in_warnings():
    status = peer_rows.status_from_error("RuntimeError", "No available kernel. Aborting execution.",
                                         ["Flash attention kernel not used because:",
                                          "Flash attention has been runtime disabled.",
                                          "cuDNN SDPA is not deterministic. (Triggered internally at /x/s.cpp:1.)",
                                          "cuDNN SDPA is not deterministic."])
    assert status == "unsupported: No available kernel. Aborting execution. (cuDNN SDPA is not deterministic.)"
    assert peer_rows.status_from_error("NotImplementedError", "no fp8\nmore").startswith("unsupported: no fp8")
    assert peer_rows.status_from_error("RuntimeError", "CUDA error: an illegal memory access was encountered",
                                       ["unrelated"]) == "error: CUDA error: an illegal memory access was encountered"
    assert peer_rows.status_kind("unsupported: x: y") == "unsupported"
    assert peer_rows.status_kind(None) == "ok"


def test_ratio_to_best_peer_excludes_dash_and_failed_rows():
    rows = [row("dash_attn", True, 90.0), row("dash_attn", False, 99.0), row("sdpa_cudnn", False, 60.0),
            row("sdpa_flash", True, 30.0), row("fa3", False, 500.0, status="unsupported: no"),
            row("sdpa_flash", True, 20.0, seqlen=2048)]
    peer_rows.annotate_best_peer(rows)
    dash_det, dash_atomic, cudnn, flash_det, fa3, other = rows
    assert dash_det["best_peer"] == "SDPA cuDNN" and dash_det["ratio_to_best_peer"] == pytest.approx(1.5)
    assert dash_atomic["ratio_to_best_peer"] == pytest.approx(99 / 60)
    assert dash_det["best_det_peer"] == "SDPA flash det." and dash_det["ratio_to_best_det_peer"] == pytest.approx(3)
    assert cudnn["ratio_to_best_peer"] == pytest.approx(1.0)
    assert fa3["ratio_to_best_peer"] is None  # not measured: no ratio
    assert other["best_peer"] == "SDPA flash det." and other["ratio_to_best_peer"] == pytest.approx(1.0)


def test_best_deterministic_backward_peer_must_rerun_bitwise_equal():
    rows = [row("dash_attn", True, 80.0, "bwd", bitwise=True), row("sdpa_efficient", True, 70.0, "bwd", bitwise=False),
            row("sdpa_flash", True, 40.0, "bwd", bitwise=True)]
    peer_rows.annotate_best_peer(rows)
    assert rows[0]["best_peer"] == "SDPA efficient det."
    assert rows[0]["best_det_peer"] == "SDPA flash det." and rows[0]["ratio_to_best_det_peer"] == pytest.approx(2.0)


def test_rows_of_the_first_sdpa_script_read_like_new_ones():
    old = {"device": "GPU", "torch": "x", "rows": [
        {"impl": "sdpa_flash", "pass_": "bwd", "deterministic": True, "head_dim": 64, "mask": "full", "seqlen": 512,
         "median_ms": 1.0, "tflops": 11.0},
        {"impl": "sdpa_cudnn", "pass_": "-", "deterministic": True, "head_dim": 64, "mask": "full", "seqlen": 512,
         "error": "No available kernel. Aborting execution."}]}
    rows = peer_rows.load_peers(old)["rows"]
    assert rows[0]["pass"] == "bwd" and rows[0]["status"] == "ok" and rows[0]["label"] == "SDPA flash det."
    assert [r["pass"] for r in rows[1:]] == ["fwd", "bwd"]
    assert all(r["status"].startswith("unsupported: No available kernel") for r in rows[1:])
    assert peer_rows.series(rows, impl="sdpa_flash", **{"pass": "bwd"}) == [11.0, None, None, None, None, None]
    assert peer_rows.variants_in(rows, "bwd") == [("sdpa_flash", True)]


def test_gqa_rows_are_their_own_shape_for_ratios_series_and_tables():
    standard = [dict(row("dash_attn", True, 100.0, seqlen=4096, mask="causal"), heads=16, heads_kv=16, batch=4),
                dict(row("sdpa_flash", False, 50.0, seqlen=4096, mask="causal"), heads=16, heads_kv=16, batch=4)]
    gqa = [dict(row("dash_attn", True, 90.0, seqlen=4096, mask="causal"), heads=32, heads_kv=8, batch=4),
           dict(row("fa4", False, 120.0, seqlen=4096, mask="causal"), heads=32, heads_kv=8, batch=4)]
    peer_rows.annotate_best_peer(standard + gqa)
    assert standard[0]["best_peer"] == "SDPA flash" and standard[0]["ratio_to_best_peer"] == pytest.approx(2.0)
    assert gqa[0]["best_peer"] == "FA4" and gqa[0]["ratio_to_best_peer"] == pytest.approx(0.75)
    match = dict(impl="dash_attn", deterministic=True, head_dim=128, mask="causal", **{"pass": "fwd"})
    assert peer_rows.series(standard + gqa, **match)[3] == 100.0
    assert peer_rows.series(standard + gqa, gqa=True, **match)[3] == 90.0


def test_latest_records_carry_the_required_fields_and_types():
    rows = [dict(row("fa4", True, 321.5, "bwd", bitwise=True, seqlen=8192, mask="causal"), batch=2, heads=32,
                 heads_kv=8, median_ms=1.5, min_ms=1.4, max_ms=1.7, verified=True, error_ratio=0.3,
                 protocol="autograd", row_group="gqa"),
            dict(row("cudnn", False, 200.0, "fwd", seqlen=4096, head_dim=256), batch=4, heads=8, heads_kv=8,
                 median_ms=1.0, min_ms=0.9, max_ms=1.1, protocol="direct_op", row_group="hdim256"),
            dict(row("dash_attn", True, None, "bwd", status="error: boom", seqlen=512, head_dim=64), batch=32,
                 heads=32, heads_kv=32, protocol="autograd", row_group="standard")]
    records = peer_rows.latest_records({"commit": "abc1234", "date": "2026-12-02T00:00:00+00:00", "device": "GPU",
                                        "rows": rows})
    types = {"impl": str, "deterministic": bool, "pass": str, "hdim": int, "causal": bool, "seqlen": int,
             "batch": int, "heads_q": int, "heads_kv": int, "commit": str, "date": str}
    for record in records:
        assert list(record) == list(peer_rows.LATEST_FIELDS)
        assert all(isinstance(record[field], kind) for field, kind in types.items())
        assert record["tflops"] is None or isinstance(record["tflops"], float)
        assert record["bitwise_rerun"] is None or isinstance(record["bitwise_rerun"], bool)
    gqa, fwd, failed = records
    assert (gqa["impl"], gqa["pass"], gqa["hdim"], gqa["causal"], gqa["heads_q"], gqa["heads_kv"], gqa["batch"]) == \
        ("fa4", "bwd", 128, True, 32, 8, 2)
    assert gqa["tflops"] == 321.5 and gqa["bitwise_rerun"] is True and gqa["deterministic"] is True
    assert fwd["bitwise_rerun"] is None and fwd["causal"] is False and fwd["protocol"] == "direct_op"
    assert failed["tflops"] is None and failed["bitwise_rerun"] is None and failed["status"] == "error: boom"
    assert json.loads(json.dumps(records)) == records


def test_standard_grid_rows_leave_chosen_shapes_out():
    grid = {"seqlen": 1024, "head_dim": 128, "batch": 16, "heads_q": 16, "heads_kv": 16, "seqlen_q": 1024,
            "seqlen_k": 1024}
    others = [dict(grid, heads_kv=4), dict(grid, seqlen_k=2048), dict(grid, batch=1), dict(grid, heads_q=8, heads_kv=8)]
    assert peer_rows.standard_grid_rows([grid] + others) == [grid]
    old_format = {"seqlen": 512, "head_dim": 64}
    assert peer_rows.standard_grid_rows([old_format]) == [old_format]


def test_result_files_round_trip(tmp_path):
    rows = [dict(impl="a", tflops=1.5, verified=None), dict(impl="b", extra="x")]
    result_files.write_json(tmp_path / "r.json", {"device": "synthetic", "rows": rows})
    assert json.loads((tmp_path / "r.json").read_text())["rows"] == rows
    result_files.write_csv(tmp_path / "r.csv", rows, ("impl", "tflops", "verified"))
    lines = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert list(lines[0]) == ["impl", "tflops", "verified", "extra"]
    assert lines[0]["tflops"] == "1.5" and lines[0]["verified"] == "" and lines[1]["extra"] == "x"
    assert not list(tmp_path.glob("*.tmp"))


def e2e_row(impl, deterministic, step, attn, status="ok", seqlen=4096):
    return {"impl": impl, "deterministic": deterministic, "batch": 1, "seqlen": seqlen, "status": status,
            "step_median_ms": step, "attn_median_ms": attn, "label": peer_rows.label(impl, deterministic)}


def test_e2e_ratios_and_attention_share():
    rows = [e2e_row("dash_attn", True, 9.0, 3.0), e2e_row("dash_attn", False, 8.0, 2.0),
            e2e_row("sdpa_default", False, 10.0, 4.0), e2e_row("sdpa_cudnn", True, None, None, status="unsupported: x"),
            e2e_row("dash_attn", True, 30.0, 10.0, seqlen=8192)]
    e2e_rows.annotate(rows)
    det, atomic, sdpa, refused, alone = rows
    assert det["attn_share"] == pytest.approx(1 / 3)
    assert det["step_time_vs_sdpa"] == pytest.approx(0.9) and det["attn_time_vs_sdpa"] == pytest.approx(0.75)
    assert det["step_time_vs_dash_atomic"] == pytest.approx(9 / 8)
    assert sdpa["step_time_vs_sdpa"] == pytest.approx(1.0)
    assert refused["step_time_vs_sdpa"] is None and refused["attn_share"] is None
    assert alone["step_time_vs_sdpa"] is None  # no SDPA row at that seqlen


def test_e2e_flops_count_matmuls_three_times_and_attention_three_and_a_half():
    flops = e2e_rows.block_flops(matmul_params=1000, batch=2, seqlen=8, heads=4, head_dim=16, causal=True)
    attention_fwd = 4 * 2 * 4 * 8 * 8 * 16 / 2
    assert flops["attention"] == 3.5 * attention_fwd
    assert flops["step"] == 3 * 2 * 2 * 8 * 1000 + 3.5 * attention_fwd


def test_series_and_best_peers_keep_score_mod_rows_apart():
    base = dict(head_dim=128, mask="causal", seqlen=16384, batch=1, heads=32, heads_kv=8, status="ok", deterministic=True)
    plain = dict(base, impl="fa4", label="FA4 det.", tflops=500.0, bitwise=True, **{"pass": "bwd"})
    windowed = dict(plain, tflops=600.0, score_mods="window (4096, 0)")
    assert peer_rows.series([plain, windowed], gqa=True, impl="fa4") == [None] * 5 + [500.0]
    assert peer_rows.series([plain, windowed], gqa=True, impl="fa4", score_mods="window (4096, 0)")[-1] == 600.0
    mine = dict(plain, impl="dash_attn", label="dash_attn det.", tflops=550.0)
    peer_rows.annotate_best_peer([plain, windowed, mine])
    assert mine["ratio_to_best_peer"] == 1.1
