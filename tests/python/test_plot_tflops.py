"""bench/plot_tflops.py without matplotlib or torch (CI): one colour per
series whatever their number, and an input file without dash_attn rows is
an error naming the file instead of a plot silently missing its lines.
Every number is synthetic, made up for the test."""
import json
import pathlib
import re
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import plot_tflops  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_bench_tables import anchors_fixture, dash_bench_fixture, peers_document  # noqa: E402


@pytest.mark.parametrize("count", [1, 9, 10, 11, 24, 200, 600])
def test_every_series_gets_its_own_colour(count):
    colors = plot_tflops.series_colors(f"series {i}" for i in range(count))
    assert len(colors) == count
    assert len(set(colors.values())) == count
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colors.values())


def test_colours_start_with_the_default_cycle_and_follow_the_label():
    colors = plot_tflops.series_colors(["a", "b", "a", "c"])
    assert list(colors) == ["a", "b", "c"]  # a label seen twice is one series
    assert list(colors.values()) == list(plot_tflops.BASE_COLORS[:3])


def many_peers_document():
    """peers_document with five more implementations in both modes: more
    series than tab10 has colours."""
    document = peers_document()
    extra = []
    for row in document["rows"]:
        if row["impl"] == "sdpa_cudnn" and row["tflops"] is not None:
            for impl in ("sdpa_efficient", "fa2", "fa3", "fa4", "cudnn"):
                for det in (False, True):
                    extra.append(dict(row, impl=impl, deterministic=det,
                                      label=plot_tflops.peer_rows.label(impl, det)))
    document["rows"] = document["rows"] + extra
    return document


def test_the_figures_series_have_distinct_colours():
    figure = plot_tflops.panels(dash_bench_fixture(), many_peers_document(), anchors_fixture())
    labels = [label for panel in figure for label, _, _ in panel["lines"]]
    colors = plot_tflops.series_colors(labels)
    assert len(set(colors.values())) == len(set(labels)) > 10  # more series than tab10 has colours


def write(tmp_path, name, document):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_dash_bench_file_without_dash_attn_rows_is_an_error_naming_it(tmp_path):
    model_run = dash_bench_fixture()
    for row in model_run["rows"]:
        row["impl"], row["status"] = "model", "modeled"  # dash-bench --model: no measurement
    ours = write(tmp_path, "model_run.json", model_run)
    peers = write(tmp_path, "peers.json", peers_document())
    with pytest.raises(SystemExit) as stop:
        plot_tflops.main([ours, peers, str(tmp_path / "out.svg")])
    message = str(stop.value)
    assert ours in message and "no dash_attn row" in message and "impls: model" in message
    assert not (tmp_path / "out.svg").exists()


def test_dash_bench_file_with_chosen_shapes_only_is_an_error(tmp_path):
    chosen = dash_bench_fixture()
    for row in chosen["rows"]:
        row.update(batch=1, heads_q=8, heads_kv=8)  # not the standard grid's 16k tokens, hidden 2048
    ours = write(tmp_path, "chosen.json", chosen)
    with pytest.raises(SystemExit, match="chosen.json: no dash_attn row"):
        plot_tflops.main([ours, write(tmp_path, "peers.json", peers_document()), str(tmp_path / "out.svg")])


def test_peers_file_is_the_dash_attn_source_without_a_dash_bench_file(tmp_path):
    peers = peers_document()
    peers["rows"] = [r for r in peers["rows"] if r["impl"] != "dash_attn"]
    path = write(tmp_path, "sdpa_only.json", peers)
    with pytest.raises(SystemExit, match="sdpa_only.json: no dash_attn row .* peers file"):
        plot_tflops.main(["-", path, str(tmp_path / "out.svg")])
    # With a dash-bench file, a peers file of peers alone is fine: dash_attn comes from dash-bench.
    pytest.importorskip("matplotlib")
    plot_tflops.main([write(tmp_path, "ours.json", dash_bench_fixture()), path, str(tmp_path / "out.svg"),
                      "--anchors", "-"])
    assert (tmp_path / "out.svg").exists()


def test_plot_draws_each_series_in_its_colour(tmp_path):
    pytest.importorskip("matplotlib")
    figure = plot_tflops.panels(dash_bench_fixture(), many_peers_document(), anchors_fixture())
    out = tmp_path / "tflops.svg"
    plot_tflops.plot(figure, out, "synthetic")
    text = out.read_text()
    for color in plot_tflops.series_colors(label for p in figure for label, _, _ in p["lines"]).values():
        assert f"stroke: {color}" in text, color
