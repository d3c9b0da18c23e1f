"""bench/make_tables.py, plot_tflops.py and make_e2e_table.py on fixture
JSON written here (CI; the plot test needs matplotlib and is skipped
without it). Every number is synthetic, made up for the test: these are no
results."""
import json
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import make_e2e_table  # noqa: E402
import make_tables  # noqa: E402
import peer_rows  # noqa: E402
import plot_tflops  # noqa: E402

SEQLENS = list(peer_rows.SEQLENS)


def dash_bench_fixture():
    rows = []
    for h, m in make_tables.CONFIGS:
        for i, s in enumerate(SEQLENS):
            rows.append({"impl": "dash_attn", "pass": "fwd", "schedule": "-", "head_dim": h, "mask": m, "seqlen": s,
                         "tflops": 100.0 + i, "status": "ok"})
            for schedule in make_tables.BWD_SCHEDULES:
                rows.append({"impl": "dash_attn", "pass": "bwd", "schedule": schedule, "head_dim": h, "mask": m,
                             "seqlen": s, "tflops": 50.0 + i, "status": "ok"})
    return {"commit": "synthetic", "device": "Synthetic GPU", "rows": rows}


def peers_fixture():
    """dash_attn at 10x, SDPA cuDNN at 5x and SDPA flash det. at 2x the
    seqlen index + 1; cuDNN's deterministic mode refused everywhere."""
    rows = []
    for h, m in make_tables.CONFIGS:
        for i, s in enumerate(SEQLENS):
            for pass_ in peer_rows.PASSES:
                base = {"pass": pass_, "head_dim": h, "mask": m, "seqlen": s}
                for impl, det, scale in (("dash_attn", True, 10), ("dash_attn", False, 10), ("sdpa_cudnn", False, 5),
                                         ("sdpa_flash", True, 2)):
                    rows.append(dict(base, impl=impl, deterministic=det, label=peer_rows.label(impl, det),
                                     tflops=float(scale * (i + 1)), status="ok",
                                     bitwise=(det if pass_ == "bwd" else None),
                                     max_abs_diff_dq=0.0 if det else 0.25, verified=True))
                rows.append(dict(base, impl="sdpa_cudnn", deterministic=True, label="SDPA cuDNN det.", tflops=None,
                                 status="unsupported: No available kernel. Aborting execution."))
    return peer_rows.annotate_best_peer(rows)


def anchors_fixture():
    values = {f"{h} {m}": [20.0] * 6 for h, m in make_tables.CONFIGS}
    return {"source": "synthetic anchors", "fwd": values, "bwd_nondeterministic": values,
            "bwd_deterministic": values}


def peers_document():
    return {"device": "Synthetic GPU", "torch": "0.0", "cuda": "0.0", "cudnn": 0, "commit": "synthetic",
            "date": "2000-01-01", "rows": peers_fixture()}


def test_tables_list_every_implementation_and_the_anchor_labelled():
    text = make_tables.render(dash_bench_fixture(), peers_document(), anchors_fixture())
    assert "| 128 causal | dash_attn (dash-bench) | 100 | 101 | 102 | 103 | 104 | 105 |" in text
    assert "| 64 full | SDPA cuDNN | 5 | 10 | 15 | 20 | 25 | 30 |" in text
    assert "| 64 full | dash_attn det. (package) | 10 | 20 | 30 | 40 | 50 | 60 |" in text
    assert "| 64 full | FA3 (anchor) | 20 | 20 | 20 | 20 | 20 | 20 |" in text
    assert "FA3 det. (anchor)" in text and "anchors, not measured in this run" in text
    assert "SDPA cuDNN det." not in text.split("### Not measured")[0].split("### Backward reruns")[0]


def test_ratio_table_against_the_best_peer_and_the_best_deterministic_peer():
    text = make_tables.render(None, peers_document(), anchors_fixture())
    # dash 10x vs cuDNN 5x: 200%; vs the deterministic SDPA flash 2x: 500%.
    assert "| bwd | 64 full | 200 200 200 200 200 200 | 500 500 500 500 500 500 | 200 200 200 200 200 200 | " \
           "- - - - - - | - - - - - - |" in text
    assert "| fwd | 128 causal | 200 200 200 200 200 200 | 500 500 500 500 500 500 | - - - - - - |" in text


def test_dash_bench_ratios_use_the_peers_best_and_the_anchors():
    text = make_tables.render(dash_bench_fixture(), peers_document(), anchors_fixture())
    line = next(x for x in text.splitlines() if x.startswith("| fwd | 64 full |"))
    assert line.endswith("| 2000 1010 680 515 416 350 | 500 505 510 515 520 525 |")


def test_determinism_and_refusals_are_reported():
    text = make_tables.render(None, peers_document(), None)
    assert "| dash_attn det. | 24/24 | 0 | 24/24 |" in text
    assert "| SDPA cuDNN | 0/24 | 0.25 | 24/24 |" in text
    assert "- SDPA cuDNN det. bwd: unsupported: No available kernel. Aborting execution. (24 rows)" in text
    assert "(anchor) | 20" not in text  # no anchor rows without anchors


def test_tables_command_line_reads_files(tmp_path, capsys):
    (tmp_path / "ours.json").write_text(json.dumps(dash_bench_fixture()))
    (tmp_path / "peers.json").write_text(json.dumps(peers_document()))
    make_tables.main([str(tmp_path / "ours.json"), str(tmp_path / "peers.json")])
    assert "### Backward per schedule" in capsys.readouterr().out


def test_plot_panels_one_per_pass_hdim_and_mask():
    figure = plot_tflops.panels(dash_bench_fixture(), peers_document(), anchors_fixture())
    assert [(p["pass_"], p["head_dim"], p["mask"]) for p in figure] == [
        (p, h, m) for p in ("fwd", "bwd") for h, m in plot_tflops.CONFIGS]
    forward = [label for label, _, _ in figure[0]["lines"]]
    backward = {label: kind for label, _, kind in figure[4]["lines"]}
    assert forward == ["dash_attn", "SDPA cuDNN", "FA3 (anchor)"]  # dash-bench replaces the package rows
    assert backward == {"dash_attn atomic": "dash", "dash_attn det. (auto)": "dash", "SDPA cuDNN": "peer",
                        "SDPA flash det.": "peer", "FA3 non-det. (anchor)": "anchor", "FA3 det. (anchor)": "anchor"}
    without_dash_bench = plot_tflops.panels(None, peers_document(), None)
    assert [label for label, _, _ in without_dash_bench[4]["lines"]][:2] == ["dash_attn det.", "dash_attn atomic"]


def test_plot_writes_an_image(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "tflops.svg"
    plot_tflops.plot(plot_tflops.panels(dash_bench_fixture(), peers_document(), anchors_fixture()), out, "synthetic")
    assert out.read_text().lstrip().startswith("<?xml")


def test_e2e_table_rows_ratios_and_refusals():
    rows = [
        {"impl": "dash_attn", "deterministic": True, "label": "dash_attn det.", "batch": 1, "seqlen": 4096,
         "status": "ok", "step_median_ms": 9.0, "step_min_ms": 8.5, "step_max_ms": 9.5, "step_tflops": 111.0,
         "attn_median_ms": 3.0, "bitwise": True, "attn_bitwise": True, "out_max_diff_vs_sdpa": 0.0},
        {"impl": "dash_attn", "deterministic": False, "label": "dash_attn atomic", "batch": 1, "seqlen": 4096,
         "status": "ok", "step_median_ms": 8.0, "step_min_ms": 8.0, "step_max_ms": 8.0, "step_tflops": 125.0,
         "attn_median_ms": 2.0, "bitwise": False, "attn_bitwise": False, "out_max_diff_vs_sdpa": 0.0},
        {"impl": "sdpa_default", "deterministic": False, "label": "SDPA default", "sdpa_backend": "FLASH_ATTENTION",
         "batch": 1, "seqlen": 4096, "status": "ok", "step_median_ms": 10.0, "step_min_ms": 10.0,
         "step_max_ms": 10.0, "step_tflops": 100.0, "attn_median_ms": 4.0, "bitwise": True, "attn_bitwise": True,
         "out_max_diff_vs_sdpa": 0.0},
        {"impl": "sdpa_cudnn", "deterministic": True, "label": "SDPA cuDNN det.", "batch": 1, "seqlen": 4096,
         "status": "unsupported: synthetic reason"}]
    document = {"block": {"hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128},
                "device": "Synthetic GPU", "batch": 1, "rows": rows, "skipped": {"fa3": "not importable"}}
    text = make_e2e_table.render(document)
    assert "| 4096 | dash_attn det. | 9.00 (8.50-9.50) | 111 | 3.00 | 33.3 | 90.0 | 112.5 | equal / equal | 0 |" in text
    assert "| 4096 | SDPA default (FLASH_ATTENTION) | 10.00 (10.00-10.00) | 100 | 4.00 | 40.0 | 100.0 | 125.0 |" in text
    assert "| 4096 | SDPA cuDNN det. | unsupported: synthetic reason |" in text
    assert "- not measured: fa3: not importable" in text


def test_tables_for_a_head_dim_without_anchors(tmp_path, capsys):
    """--hdims 256: the FA3 anchors cover 64 and 128 only, so 256 gets no anchor rows or ratios."""
    ours, peers = dash_bench_fixture(), peers_document()
    for row in ours["rows"] + peers["rows"]:
        row["head_dim"] = 256 if row["head_dim"] == 128 else row["head_dim"]
    (tmp_path / "ours.json").write_text(json.dumps(ours))
    (tmp_path / "peers.json").write_text(json.dumps(peers))
    make_tables.main([str(tmp_path / "ours.json"), str(tmp_path / "peers.json"), "--hdims", "256"])
    text = capsys.readouterr().out
    assert "| 256 causal | dash_attn (dash-bench) | 100 | 101 | 102 | 103 | 104 | 105 |" in text
    assert "| 64 full |" not in text and "| 256 full | FA3" not in text
    line = next(x for x in text.splitlines() if x.startswith("| fwd | 256 full |"))
    assert line.endswith("| - - - - - - |")


def test_bars_count_rows_at_each_bar():
    ours = dash_bench_fixture()
    for row in ours["rows"]:  # atomic 17 (85% of the anchor's 20), fa3 15.4 (91% of it), the rest lower
        if row["pass"] == "bwd":
            row["tflops"] = {"atomic": 17.0, "fa3": 15.4}.get(row["schedule"], 10.0)
    ours["rows"][-1]["tflops"] = 16.9  # 128 causal 16k auto: not the best deterministic
    text = make_tables.render(ours, peers_document(), anchors_fixture())
    assert "| 64 full | 85 85 85 85 85 85 | 91 91 91 91 91 91 | 59 59 59 59 59 59 |" in text
    assert "| 128 causal | 85 85 85 85 85 85 | 91 91 91 91 91 99 | 59 59 59 59 59 99 |" in text
    assert "Rows at the bars: atomic 24/24, deterministic 24/24." in text
