"""The benchmark scripts with torch on the CPU: the Llama block, the attention
adapters and the reference check compute what they claim, and bench/peers.py
and bench/e2e_block.py run end to end on tiny shapes (--device cpu: a smoke
run of their logic; the times mean nothing). Skipped without torch."""
import json
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import attention_impls  # noqa: E402
from llama_block import BlockConfig, LlamaBlock, apply_rope, rope_tables  # noqa: E402
from reference_check import ReferenceSlice  # noqa: E402


def gqa_attention(q, k, v, causal):
    """Plain attention in fp64 with the kv heads repeated, (b, s, h, d) layout."""
    groups = q.shape[2] // k.shape[2]
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("name", ["sdpa_default", "sdpa_flash"])
def test_sdpa_adapter_takes_and_returns_flash_attention_layout_with_gqa(name):
    impl = attention_impls.make(name)
    q = torch.randn(2, 64, 4, 32)
    k, v = torch.randn(2, 64, 2, 32), torch.randn(2, 64, 2, 32)
    with impl.mode(False):
        out = impl.function(True, False)(q, k, v)
    assert out.shape == q.shape
    assert (out.double() - gqa_attention(q, k, v, True)).abs().max().item() < 1e-5


def test_deterministic_mode_is_restored():
    impl = attention_impls.make("sdpa_flash")
    with impl.mode(True):
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()


def test_reference_slice_accepts_correct_and_rejects_wrong_attention():
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(2, 96, 3, 32, dtype=torch.bfloat16) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    reference = ReferenceSlice(q, k, v, dout, causal=True)
    impl = attention_impls.make("sdpa_flash")
    with impl.mode(False):
        out = impl.function(True, False)(q, k, v)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    # The CPU's flash kernel is not held to FA3's rule (ratio <= 1) on every draw; a few x is rounding.
    assert reference.check([out])[1] < 3 and reference.check(grads, first=1)[1] < 3
    with impl.mode(False):
        not_causal = impl.function(False, False)(q, k, v)
    assert reference.check([not_causal])[1] > 10


def test_rope_rotates_pairs_without_changing_their_length():
    cos, sin = rope_tables(16, 8, 10000.0, "cpu", torch.float64)
    x = torch.randn(1, 16, 2, 8, dtype=torch.float64)
    y = apply_rope(x, cos, sin)
    pair_norm = lambda t: t[..., :4] ** 2 + t[..., 4:] ** 2  # noqa: E731  (rotate-half pairs i and i + d/2)
    assert torch.allclose(pair_norm(x), pair_norm(y))
    assert torch.allclose(y[:, 0], x[:, 0])  # position 0: no rotation


def test_block_forward_and_backward_with_any_attention():
    config = BlockConfig(hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96)
    block = LlamaBlock(config).double()
    x = torch.randn(2, 24, 64, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_tables(24, 16, config.rope_base, "cpu", torch.float64)
    out = block(x, lambda q, k, v: gqa_attention(q, k, v, True), cos, sin)
    sdpa = attention_impls.make("sdpa_default")
    with sdpa.mode(False):
        assert torch.allclose(out, block(x, sdpa.function(True, False), cos, sin))
    grads = torch.autograd.grad(out.sum(), [x] + list(block.parameters()))
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert config.matmul_params() == 64 * 16 * (2 * 4 + 2 * 2) + 3 * 64 * 96


def run_script(script, *args):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_peers_script_runs_and_records_refusals(tmp_path):
    output = run_script("peers.py", "--hdims", "32", "--seqlens", "64,128", "--total-tokens", "256", "--hidden", "64",
                        "--reps", "2", "--warmup", "1", "--impls", "sdpa_flash,sdpa_cudnn:nondet",
                        "--json", str(tmp_path / "p.json"), "--csv", str(tmp_path / "p.csv"), "--commit", "test",
                        "--latest-json", str(tmp_path / "latest.json"))
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["commit"] == "test" and len(document["rows"]) == 2 * 2 * 3 * 2
    # Grid options without --rows: the standard grid alone, as before the row groups.
    assert document["row_groups"] == ["standard"] and {r["row_group"] for r in document["rows"]} == {"standard"}
    records = json.loads((tmp_path / "latest.json").read_text())
    assert len(records) == len(document["rows"]) and records[0]["commit"] == "test"
    assert {(r["hdim"], r["heads_q"], r["heads_kv"]) for r in records} == {(32, 2, 2)}
    flash = [r for r in document["rows"] if r["impl"] == "sdpa_flash"]
    # FA3's rule (verified) is statistical; CPU kernels are not what it was made for. Far off it is a bug.
    assert all(r["status"] == "ok" and r["error_ratio"] < 10 and r["verified"] is not None for r in flash)
    assert all(r["bitwise"] is not None for r in flash if r["pass"] == "bwd")
    cudnn = [r for r in document["rows"] if r["impl"] == "sdpa_cudnn"]
    assert all(r["status"].startswith("unsupported:") for r in cudnn)  # no cuDNN on the CPU
    assert "SDPA flash det." in output
    assert (tmp_path / "p.csv").read_text().startswith("impl,label,pass,")


def test_e2e_script_runs(tmp_path):
    run_script("e2e_block.py", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16",
               "--intermediate", "96", "--seqlens", "32", "--reps", "2", "--warmup", "1",
               "--impls", "sdpa_default,sdpa_flash:det", "--json", str(tmp_path / "e.json"))
    rows = json.loads((tmp_path / "e.json").read_text())["rows"]
    assert [r["label"] for r in rows] == ["SDPA default", "SDPA flash det."]
    assert all(r["status"] == "ok" and r["bitwise"] and r["attn_bitwise"] for r in rows)
    assert rows[0]["step_time_vs_sdpa"] == 1.0 and rows[1]["out_max_diff_vs_sdpa"] < 0.1


def test_host_overhead_script_runs(tmp_path):
    output = run_script("host_overhead.py", "--impls", "sdpa_default,sdpa_flash:det", "--calls", "2", "--samples", "2",
                        "--warmup", "1", "--shape", "1,32,2,16", "--json", str(tmp_path / "h.json"), "--commit", "test")
    document = json.loads((tmp_path / "h.json").read_text())
    rows = document["rows"]
    assert [(r["label"], r["pass"]) for r in rows] == [("SDPA default", "fwd"), ("SDPA default", "fwd+bwd"),
                                                       ("SDPA flash det.", "fwd"), ("SDPA flash det.", "fwd+bwd")]
    assert all(r["status"] == "ok" and r["host_us"] > 0 and r["min_us"] <= r["host_us"] <= r["max_us"] for r in rows)
    assert document["shape"] == dict(batch=1, seqlen=32, heads=2, head_dim=16) and document["commit"] == "test"
    assert "SDPA flash det." in output
