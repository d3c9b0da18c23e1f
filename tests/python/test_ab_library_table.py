"""bench/ab_library_table.py on fixture JSON written here (CI), in the names
scripts/ab_library.sh gives its runs. The numbers are synthetic: no results."""
import json
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import ab_library_table  # noqa: E402


def peers_row(tflops):
    return dict(label="dash_attn det.", head_dim=64, mask="full", seqlen=512, heads=32, heads_kv=32, tflops=tflops,
                **{"pass": "bwd"})


def varlen_row(kind, tflops):
    return dict(pass_name="bwd", hdim=128, causal=True, seqlen=2048, kind=kind, tflops=tflops)


def test_collect_groups_rounds_by_bench_row_and_variant(tmp_path):
    for round_, (a, b) in enumerate([(100.0, 110.0), (102.0, 112.0)], start=1):
        for name, tflops in (("head", a), ("new_tile", b)):
            (tmp_path / f"peers_{name}.{round_}.json").write_text(json.dumps({"rows": [peers_row(tflops)]}))
            rows = [varlen_row("fixed", tflops), varlen_row("varlen", tflops / 2)]
            (tmp_path / f"varlen_vs_fixed_{name}.{round_}.json").write_text(json.dumps({"rows": rows}))
    (tmp_path / "peers_other.1.json").write_text(json.dumps({"rows": [peers_row(1.0)]}))
    table = ab_library_table.collect(tmp_path, ["head", "new_tile"])
    assert table["peers"][("bwd", 64, "full", 512, "32/32", "dash_attn det.")] == {"head": [100.0, 102.0],
                                                                                   "new_tile": [110.0, 112.0]}
    assert table["varlen_vs_fixed"][("bwd", 128, "causal", 2048, "varlen")]["new_tile"] == [55.0, 56.0]
    assert "other" not in table["peers"][("bwd", 64, "full", 512, "32/32", "dash_attn det.")]
