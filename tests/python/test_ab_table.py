"""bench/ab_table.py on fixture dash-bench logs written here (CI). The
numbers are synthetic, made up for the test: no results."""
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import ab_table  # noqa: E402

HEADER = "impl      pass schedule        det shape b,sq,sk,hq,hkv,d   mask          ms  TFLOPS  %ceil   max_err verified    bitwise status"


def log(atomic, auto):
    return "\n".join([
        "device: synthetic",
        HEADER,
        f"dash_attn bwd  atomic          no  32,512,512,32,32,64      full       0.600   {atomic:.1f}   30.0  2.0e-03 yes/slice   -       ok",
        "    repro: dash-bench --shape 32,512,512,32,32,64 --masks full --passes bwd --schedules atomic",
        f"dash_attn bwd  auto            yes 32,512,512,32,32,64      full       0.650   {auto:.1f}   29.0  2.0e-03 yes/slice   2/2     ok",
        "dash_attn fwd  -               -   32,512,512,32,32,64      full       0.200   300.0   31.0         - -           -       ok",
    ])


def test_parse_log_reads_backward_rows_by_schedule_and_forward_rows():
    rows = ab_table.parse_log(log(100.0, 90.0))
    assert rows == {("32,512,512,32,32,64", "full", "atomic"): 100.0, ("32,512,512,32,32,64", "full", "auto"): 90.0,
                    ("32,512,512,32,32,64", "full", "fwd"): 300.0}


def test_table_averages_rounds_and_divides_by_the_first_variant(tmp_path):
    for name, rounds in {"head": [(100.0, 90.0), (110.0, 100.0)], "new": [(126.0, 95.0), (126.0, 95.0)]}.items():
        for i, (atomic, auto) in enumerate(rounds, 1):
            (tmp_path / f"{name}.{i}.log").write_text(log(atomic, auto))
    out = subprocess.run([sys.executable, str(BENCH / "ab_table.py"), str(tmp_path), "head", "new"],
                         check=True, capture_output=True, text=True).stdout
    assert "| 32,512,512,32,32,64 | full | atomic | 105.0 | 126.0 | 1.200 |" in out
    assert "| 32,512,512,32,32,64 | full | auto | 95.0 | 95.0 | 1.000 |" in out


def test_parse_log_keeps_dash_benchs_score_mods_in_the_mask():
    text = "\n".join([
        HEADER,
        "dash_attn bwd  auto            yes 1,16384,16384,32,8,128   causal window 4096,0     5.733   419.6   44.9"
        "         - -           2/2     ok",
        "dash_attn bwd  atomic          no  4,4096,4096,16,8,256     causal window 4096,0 softcap 50     4.393   313.0"
        "   33.5         - -           -       ok",
        "dash_attn fwd  -               -   4,4096,4096,16,8,256     full softcap 30     1.145   480.2   51.5"
        "         - -           -       ok",
    ])
    assert ab_table.parse_log(text) == {
        ("1,16384,16384,32,8,128", "causal window 4096,0", "auto"): 419.6,
        ("4,4096,4096,16,8,256", "causal window 4096,0 softcap 50", "atomic"): 313.0,
        ("4,4096,4096,16,8,256", "full softcap 30", "fwd"): 480.2,
    }
