"""bench/peers.py's score mods (--window, --softcap, --sinks) on the CPU: the
band's visible fraction (what TFLOPS count) against a brute-force count, the
mods-aware fp64 check against reference_attention and a run without the mods,
and a smoke run of the script (SDPA takes the window; peers without an
adapter get 'unsupported' rows). Skipped without torch."""
import json
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
import peers  # noqa: E402
import reference_attention  # noqa: E402


@pytest.mark.parametrize("seqlen_q, seqlen_k", [(64, 64), (50, 80), (80, 50)])
@pytest.mark.parametrize("causal, window", [(True, (-1, -1)), (True, (7, 0)), (False, (5, 3)), (False, (0, 0)),
                                            (True, (-1, 4)), (False, (-1, 9)), (False, (200, 200))])
def test_band_fraction_counts_the_visible_pairs(seqlen_q, seqlen_k, causal, window):
    mask = reference_attention.visible(seqlen_q, seqlen_k, causal, "cpu", window)
    assert torch.equal(peers.visible_mask(seqlen_q, seqlen_k, causal, window), mask)
    if window == (-1, -1):  # the papers' convention for plain causal
        assert peers.band_fraction(seqlen_q, seqlen_k, causal, window) == 0.5
    else:
        assert peers.band_fraction(seqlen_q, seqlen_k, causal, window) == pytest.approx(mask.float().mean().item())


@pytest.mark.parametrize("mods", [peers.ScoreMods((9, 0)), peers.ScoreMods((-1, -1), 2.0),
                                  peers.ScoreMods((6, 6), 3.0, True)], ids=["window", "softcap", "all"])
def test_mods_reference_accepts_the_mods_and_rejects_their_absence(mods):
    gen = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(1, 48, heads, 16, generator=gen).bfloat16() for heads in (4, 2, 2, 4))
    sinks = torch.randn(4, generator=gen) if mods.sinks else None
    causal = mods.window[1] == 0
    reference = peers.ModsReferenceSlice(q, k, v, dout, causal, mods, sinks)
    for right in (True, False):
        leaves = [t.float().requires_grad_() for t in (q, k, v)]
        settings = (mods.window, mods.softcap, sinks) if right else ((-1, -1), 0.0, None)
        out, _ = reference_attention.attend(leaves[0][0], leaves[1][0], leaves[2][0], None, causal, torch.float32,
                                            *settings)
        grads = torch.autograd.grad(out, leaves, dout[0].float())
        out_ratio, grad_ratio = reference.check([out[None]])[1], reference.check(grads, first=1)[1]
        if right:
            assert out_ratio <= 1 and grad_ratio <= 1
        else:
            assert out_ratio > 1


def run_peers(tmp_path, *mods):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "peers.py"), "--device", "cpu", "--hdims", "32",
                           "--seqlens", "64", "--total-tokens", "128", "--hidden", "64", "--reps", "2", "--warmup",
                           "1", "--impls", "sdpa_default,cudnn", "--json", str(tmp_path / "p.json"), *mods],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads((tmp_path / "p.json").read_text())


def test_peers_with_a_window_counts_the_band_and_verifies(tmp_path):
    output, document = run_peers(tmp_path, "--window", "15,0", "--masks", "causal")
    assert document["score_mods"] == dict(window=[15, 0], softcap=0.0, sinks=False)
    assert "score mods: window (15, 0)" in output
    rows = [r for r in document["rows"] if r["impl"] == "sdpa_default"]
    assert rows and all(r["status"] == "ok" and r["verified"] is not None and r["error_ratio"] < 10 for r in rows)
    assert all(r["score_mods"] == "window (15, 0)" for r in rows)
    fraction = peers.band_fraction(64, 64, True, (15, 0))
    fwd = next(r for r in rows if r["pass"] == "fwd")
    flops = 4 * 2 * 2 * 64 * 64 * 32 * fraction
    assert fwd["tflops"] == pytest.approx(flops / (fwd["median_ms"] * 1e9))


def test_peers_without_an_adapter_give_unsupported_rows(tmp_path):
    _, document = run_peers(tmp_path, "--softcap", "30", "--sinks", "--masks", "full")
    rows = [r for r in document["rows"] if r["impl"] == "sdpa_default"]
    assert rows and all(r["status"].startswith("unsupported: not supported: sdpa_default with softcap 30, sinks")
                        for r in rows)
