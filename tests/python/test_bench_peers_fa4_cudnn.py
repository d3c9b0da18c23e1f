"""The FlashAttention-4 and cuDNN-frontend adapters of bench/attention_impls.py
and their path through bench/peers.py, on the CPU: fake flash_attn.cute and
cudnn.sdpa.fwd.torch_op modules (and a fake torch.ops.cudnn namespace) are put
into sys.modules, record every call (layouts, scale, causal and
deterministic flags) and compute plain attention, so the argument mapping,
the direct-op backward protocol, the GQA reference check and the
latest_peers.json records are checked without a GPU or the packages.
Skipped without torch."""
import json
import pathlib
import sys
import types

import pytest

torch = pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import attention_impls  # noqa: E402
import peer_rows  # noqa: E402
import peers  # noqa: E402
from reference_group import GroupReferenceSlice  # noqa: E402


def plain_attention(q, k, v, scale, causal):
    """(batch, heads, seqlen, head_dim) attention in fp32 with kv heads
    repeated; returns out and the log-sum-exp (batch, heads, seqlen, 1)."""
    groups = q.shape[1] // k.shape[1]
    q, k, v = q.float(), k.float().repeat_interleave(groups, 1), v.float().repeat_interleave(groups, 1)
    scores = q @ k.transpose(-1, -2) * scale
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.softmax(scores, dim=-1) @ v, lse


def plain_gradients(dout, q, k, v, scale, causal):
    with torch.enable_grad():  # also when called inside an autograd backward
        q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
        out, _ = plain_attention(q, k, v, scale, causal)
        return torch.autograd.grad(out, (q, k, v), dout.float())


def like(result, template):
    """A fresh tensor in template's memory order holding result (as the real ops allocate)."""
    return torch.empty_like(template).copy_(result)


# ---- dash_attn on the new rows: GQA (heads_kv < heads_q) and head_dim 256 ----

@pytest.mark.parametrize("deterministic,schedule", [(True, "auto"), (False, "atomic")])
def test_dash_adapter_hands_gqa_and_hdim256_inputs_to_the_package_as_they_are(monkeypatch, deterministic, schedule):
    calls = []
    fake = types.ModuleType("dash_attn")
    fake.flash_attn_func = lambda q, k, v, **kwargs: calls.append((q, k, v, kwargs)) or torch.zeros_like(q)
    monkeypatch.setitem(sys.modules, "dash_attn", fake)
    attn = attention_impls.make("dash_attn").function(True, deterministic)
    for (heads_q, heads_kv, head_dim) in ((32, 8, 128), (8, 8, 256)):
        q, k, v, _ = bshd_inputs(batch=1, seqlen=8, heads_q=heads_q, heads_kv=heads_kv, head_dim=head_dim)
        assert attn(q, k, v).shape == q.shape
        got_q, got_k, got_v, kwargs = calls[-1]
        assert got_q is q and got_k is k and got_v is v
        assert kwargs == dict(causal=True, deterministic=deterministic, schedule=schedule)


def test_dash_package_checks_accept_the_gqa_and_hdim256_rows():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dash_checks_for_rows", ROOT / "python" / "dash_attn" / "_checks.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)

    class Shaped:  # what check_qkv reads of a CUDA bf16 tensor
        def __init__(self, shape):
            self.shape, self.dtype, self.device = shape, "torch.bfloat16", types.SimpleNamespace(type="cuda", index=0)

    for s in peer_rows.row_set(["gqa", "hdim256"]):
        q = Shaped((s["batch"], s["seqlen"], s["heads"], s["head_dim"]))
        kv = Shaped((s["batch"], s["seqlen"], s["heads_kv"], s["head_dim"]))
        checks.check_qkv("flash_attn_func", q, kv, kv)  # raises on a shape the package refuses


# ---- fake FlashAttention-4: flash_attn.cute ----

def install_fa4(monkeypatch, returns_tuple=True, signature="full"):
    calls = []

    def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(None, None), deterministic=False,
                        return_lse=False):
        calls.append(dict(q=q, k=k, v=v, softmax_scale=softmax_scale, causal=causal, deterministic=deterministic,
                          grad_enabled=torch.is_grad_enabled()))
        out, lse = plain_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                   softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5, causal)
        out = out.transpose(1, 2).to(q.dtype)
        return (out, lse) if returns_tuple else out

    def old_flash_attn_func(q, k, v, softmax_scale=None, causal=False):
        raise AssertionError("not to be called")

    package = types.ModuleType("flash_attn")
    cute = types.ModuleType("flash_attn.cute")
    cute.flash_attn_func = flash_attn_func if signature == "full" else old_flash_attn_func
    cute.flash_attn_varlen_func = lambda *a, **k: None
    package.cute = cute
    monkeypatch.setitem(sys.modules, "flash_attn", package)
    monkeypatch.setitem(sys.modules, "flash_attn.cute", cute)
    return calls


@pytest.mark.parametrize("returns_tuple", [True, False])
@pytest.mark.parametrize("causal,deterministic", [(True, True), (False, False)])
def test_fa4_adapter_passes_our_layout_scale_causal_and_deterministic(monkeypatch, returns_tuple, causal,
                                                                      deterministic):
    calls = install_fa4(monkeypatch, returns_tuple)
    impl = attention_impls.make("fa4")
    assert impl.unavailable() is None
    assert impl.layout == "bshd" and impl.protocol == "autograd" and impl.min_warmup >= 1
    q = torch.randn(2, 48, 4, 32, requires_grad=True)
    k, v = torch.randn(2, 48, 2, 32, requires_grad=True), torch.randn(2, 48, 2, 32, requires_grad=True)
    with impl.mode(deterministic):
        out = impl.function(causal, deterministic)(q, k, v)
    (call,) = calls
    assert call["q"] is q and call["k"] is k and call["v"] is v  # (batch, seqlen, heads, head_dim) as they are
    assert call["softmax_scale"] == pytest.approx(32 ** -0.5)
    assert call["causal"] is causal and call["deterministic"] is deterministic
    assert isinstance(out, torch.Tensor) and out.shape == q.shape  # out, also when (out, lse) comes back
    expected, _ = plain_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 32 ** -0.5, causal)
    assert torch.allclose(out, expected.transpose(1, 2), atol=1e-5)


def test_fa4_not_importable_or_with_another_signature_is_skipped_with_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn.cute", None)  # import raises ImportError
    reason = attention_impls.make("fa4").unavailable()
    assert reason.startswith("flash_attn.cute (FlashAttention-4) is not importable (ModuleNotFoundError")
    install_fa4(monkeypatch, signature="old")
    reason = attention_impls.make("fa4").unavailable()
    assert "lacks deterministic" in reason and "flash_attn_func(q, k, v, softmax_scale=, causal=, deterministic=)" \
        in reason


# ---- fake cuDNN frontend: cudnn.sdpa.fwd.torch_op and torch.ops.cudnn ----

FWD_SCHEMA = ("q", "k", "v", "attn_scale", "is_causal", "causal_bottom_right", "window_left", "sinks", "seq_len_q",
              "seq_len_kv", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q", "max_seqlen_kv", "return_lse")
BWD_SCHEMA = ("grad_out", "q", "k", "v", "o", "lse", "attn_scale", "is_causal", "causal_bottom_right", "window_left",
              "sinks", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q", "max_seqlen_kv", "is_deterministic")


class FakeOp:
    """A torch.ops overload packet stand-in: callable, with default._schema.arguments[i].name."""

    def __init__(self, function, names):
        self.function = function
        self.default = types.SimpleNamespace(_schema=types.SimpleNamespace(
            arguments=[types.SimpleNamespace(name=n) for n in names]))

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def install_cudnn(monkeypatch, fwd_schema=FWD_SCHEMA, bwd_schema=BWD_SCHEMA, bwd_returns=3):
    calls = []

    def sdpa_fwd(q, k, v, attn_scale, is_causal=False, return_lse=True):
        assert q.ndim == 4 and not q.requires_grad
        out, lse = plain_attention(q, k, v, attn_scale, is_causal)
        result = (like(out, q), lse)  # O adopts Q's layout
        calls.append(dict(op="fwd", q=q, k=k, v=v, attn_scale=attn_scale, is_causal=is_causal,
                          return_lse=return_lse, lse=lse, grad_enabled=torch.is_grad_enabled()))
        return result

    def sdpa_bwd(grad_out, q, k, v, o, lse, attn_scale, is_causal=False, is_deterministic=False):
        calls.append(dict(op="bwd", grad_out=grad_out, q=q, k=k, v=v, o=o, lse=lse, attn_scale=attn_scale,
                          is_causal=is_causal, is_deterministic=is_deterministic))
        grads = plain_gradients(grad_out, q, k, v, attn_scale, is_causal)
        return tuple(like(g, t) for g, t in zip(grads, (q, k, v)))[:bwd_returns]

    modules = {}
    for name in ("cudnn", "cudnn.sdpa", "cudnn.sdpa.fwd", "cudnn.sdpa.fwd.torch_op"):
        modules[name] = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, modules[name])
    namespace = types.SimpleNamespace(sdpa_fwd=FakeOp(sdpa_fwd, fwd_schema), sdpa_bwd=FakeOp(sdpa_bwd, bwd_schema))
    monkeypatch.setattr(torch.ops, "cudnn", namespace, raising=False)
    return calls


def bshd_inputs(batch=2, seqlen=40, heads_q=4, heads_kv=2, head_dim=16, dtype=torch.float32):
    q = torch.randn(batch, seqlen, heads_q, head_dim, dtype=dtype, requires_grad=True)
    k = torch.randn(batch, seqlen, heads_kv, head_dim, dtype=dtype, requires_grad=True)
    v = torch.randn(batch, seqlen, heads_kv, head_dim, dtype=dtype, requires_grad=True)
    return q, k, v, torch.randn(batch, seqlen, heads_q, head_dim, dtype=dtype)


def is_transposed_view(view, tensor):
    """view is tensor.transpose(1, 2) without a copy."""
    return view.data_ptr() == tensor.data_ptr() and view.shape == tensor.transpose(1, 2).shape and \
        view.stride() == tensor.transpose(1, 2).stride()


@pytest.mark.parametrize("causal,deterministic", [(True, True), (False, False), (True, False)])
def test_cudnn_adapter_calls_both_ops_directly_on_bhsd_views(monkeypatch, causal, deterministic):
    calls = install_cudnn(monkeypatch)
    impl = attention_impls.make("cudnn")
    assert impl.unavailable() is None
    assert impl.layout == "bshd" and impl.protocol == "direct_op" and impl.min_warmup >= 1
    q, k, v, dout = bshd_inputs()
    forward, backward = impl.direct(causal, deterministic)
    with impl.mode(deterministic):
        out, lse = forward(q, k, v)
        dq, dk, dv = backward(q, k, v, out, lse, dout)
    fwd, bwd = calls
    assert fwd["op"] == "fwd" and bwd["op"] == "bwd"
    assert all(is_transposed_view(fwd[name], t) for name, t in (("q", q), ("k", k), ("v", v)))
    assert fwd["attn_scale"] == pytest.approx(16 ** -0.5) and fwd["is_causal"] is causal and fwd["return_lse"] is True
    assert all(is_transposed_view(bwd[name], t) for name, t in (("q", q), ("k", k), ("v", v), ("grad_out", dout),
                                                                 ("o", out)))
    assert bwd["lse"] is fwd["lse"] and bwd["attn_scale"] == fwd["attn_scale"]
    assert bwd["is_causal"] is causal and bwd["is_deterministic"] is deterministic
    # Our (batch, seqlen, heads, head_dim) index order back, same values as plain attention.
    assert out.shape == q.shape and (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    expected = plain_gradients(dout.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                               16 ** -0.5, causal)
    for got, want in zip((dq, dk, dv), expected):
        assert torch.allclose(got, want.transpose(1, 2), atol=1e-4)


def test_cudnn_adapter_as_an_autograd_function_gives_the_direct_gradients(monkeypatch):
    calls = install_cudnn(monkeypatch)
    impl = attention_impls.make("cudnn")
    assert impl.unavailable() is None
    q, k, v, dout = bshd_inputs()
    out = impl.function(True, True)(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert [c["op"] for c in calls] == ["fwd", "bwd"] and calls[1]["is_deterministic"] is True
    expected = plain_gradients(dout.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                               16 ** -0.5, True)
    assert all(torch.allclose(g, e.transpose(1, 2), atol=1e-4) for g, e in zip(grads, expected))


def test_cudnn_adapter_refuses_other_signatures_and_returns_with_clear_messages(monkeypatch):
    monkeypatch.setitem(sys.modules, "cudnn.sdpa.fwd.torch_op", None)
    assert attention_impls.make("cudnn").unavailable().startswith(
        "cudnn.sdpa.fwd.torch_op (cudnn-frontend) is not importable (ModuleNotFoundError")
    install_cudnn(monkeypatch, bwd_schema=("grad_out", "q", "k", "v", "o", "lse", "attn_scale", "is_causal"))
    reason = attention_impls.make("cudnn").unavailable()
    assert reason.startswith("torch.ops.cudnn.sdpa_bwd has arguments (grad_out, q, k, v, o, lse, attn_scale, "
                             "is_causal)") and "is_deterministic=" in reason
    install_cudnn(monkeypatch, fwd_schema=("query", "key", "value", "scale", "is_causal", "return_lse"))
    assert attention_impls.make("cudnn").unavailable().startswith("torch.ops.cudnn.sdpa_fwd has arguments (query,")
    monkeypatch.setattr(torch.ops, "cudnn", types.SimpleNamespace(), raising=False)
    assert "registered no torch.ops.cudnn.sdpa_fwd, sdpa_bwd" in attention_impls.make("cudnn").unavailable()
    install_cudnn(monkeypatch, bwd_returns=2)
    impl = attention_impls.make("cudnn")
    assert impl.unavailable() is None
    q, k, v, dout = bshd_inputs()
    forward, backward = impl.direct(False, False)
    out, lse = forward(q, k, v)
    with pytest.raises(RuntimeError, match=r"sdpa_bwd returned tuple of 2; this adapter expects 3 tensors"):
        backward(q, k, v, out, lse, dout)


def test_group_reference_checks_gqa_outputs_and_summed_kv_gradients():
    torch.manual_seed(1)
    q, k, v, dout = (t.detach().to(torch.bfloat16) for t in bshd_inputs(seqlen=64, heads_q=4, heads_kv=2))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    reference = GroupReferenceSlice(q, k, v, dout, causal=True)
    assert reference.group == 2
    bhsd = [t.transpose(1, 2) for t in (q, k, v)]
    out = plain_attention(*bhsd, 16 ** -0.5, True)[0].transpose(1, 2).to(torch.bfloat16)
    grads = [g.transpose(1, 2).to(torch.bfloat16) for g in plain_gradients(dout.transpose(1, 2), *bhsd, 16 ** -0.5,
                                                                            True)]
    assert reference.check([out])[1] <= 1 and reference.check(grads, first=1)[1] <= 1
    wrong_dk = grads[1].clone()
    wrong_dk[0, :, 0] = grads[1][0, :, 1]  # the other kv head's gradient
    assert reference.check([grads[0], wrong_dk, grads[2]], first=1)[1] > 10
    not_causal = plain_attention(*bhsd, 16 ** -0.5, False)[0].transpose(1, 2).to(torch.bfloat16)
    assert reference.check([not_causal])[1] > 10


def test_peers_runs_fa4_and_cudnn_with_gqa_rows_and_writes_latest_records(monkeypatch, tmp_path, capsys):
    fa4_calls, cudnn_calls = install_fa4(monkeypatch), install_cudnn(monkeypatch)
    # A tiny GQA group (the real one is 32/8 heads at 4k-16k) and a tiny standard grid.
    monkeypatch.setattr(peer_rows, "GQA_SHAPE", dict(head_dim=32, heads_q=4, heads_kv=2, masks=("causal",),
                                                     seqlens=(64, 128)))
    monkeypatch.setattr(peer_rows, "TOTAL_TOKENS", 256)
    latest = tmp_path / "results" / "latest_peers.json"
    status = peers.main(["--device", "cpu", "--rows", "standard,gqa", "--hdims", "32", "--seqlens", "64",
                         "--masks", "causal", "--total-tokens", "128", "--hidden", "64", "--reps", "2",
                         "--warmup", "0", "--impls", "fa4,cudnn,sdpa_flash:nondet", "--commit", "test",
                         "--json", str(tmp_path / "p.json"), "--latest-json", str(latest)])
    assert status == 0
    rows = json.loads((tmp_path / "p.json").read_text())["rows"]
    assert len(rows) == 3 * 5 * 2  # shapes x variants x passes
    assert all(r["status"] == "ok" and r["verified"] for r in rows if r["impl"] in ("fa4", "cudnn")), \
        [(r["label"], r["status"], r.get("error_ratio")) for r in rows]
    assert all(r["bitwise"] is True for r in rows if r["pass"] == "bwd" and r["impl"] in ("fa4", "cudnn"))
    assert {r["protocol"] for r in rows if r["impl"] == "cudnn"} == {"direct_op"}
    assert {r["protocol"] for r in rows if r["impl"] != "cudnn"} == {"autograd"}
    assert [(r["heads"], r["heads_kv"], r["batch"]) for r in rows if r["row_group"] == "gqa"][::10] == \
        [(4, 2, 4), (4, 2, 2)]
    # Warm-up 0 asked for: the compiling peers still get one untimed call first (1 + 2 reps + 1 checked, fwd).
    fa4_shape = [c for c in fa4_calls if c["q"].shape == (2, 64, 2, 32)]
    assert len(fa4_shape) == 2 * (1 + 2 + 1)
    assert {c["deterministic"] for c in fa4_shape} == {False, True}
    assert {(c["is_deterministic"]) for c in cudnn_calls if c["op"] == "bwd"} == {False, True}
    records = json.loads(latest.read_text())
    assert len(records) == len(rows) and all(r["commit"] == "test" and r["date"] for r in records)
    gqa = [r for r in records
           if r["impl"] == "fa4" and r["deterministic"] and r["pass"] == "bwd" and r["row_group"] == "gqa"]
    assert [(r["seqlen"], r["batch"], r["heads_q"], r["causal"], r["bitwise_rerun"]) for r in gqa] == \
        [(64, 4, 4, True, True), (128, 2, 4, True, True)]
    assert all(isinstance(r["tflops"], float) for r in records)
    output = capsys.readouterr().out
    assert "cuDNN frontend det." in output and "FA4 det." in output and "4/2" in output


def test_peers_times_only_the_passes_asked_for(monkeypatch, tmp_path):
    install_fa4(monkeypatch)
    install_cudnn(monkeypatch)
    monkeypatch.setattr(peer_rows, "TOTAL_TOKENS", 256)
    for passes in ("fwd", "bwd"):
        out = tmp_path / f"{passes}.json"
        status = peers.main(["--device", "cpu", "--rows", "standard", "--hdims", "32", "--seqlens", "64",
                             "--masks", "causal", "--total-tokens", "128", "--hidden", "64", "--reps", "2",
                             "--warmup", "0", "--impls", "fa4,cudnn", "--passes", passes, "--json", str(out),
                             "--latest-json", "none"])
        assert status == 0
        rows = json.loads(out.read_text())["rows"]
        assert len(rows) == 4 and {r["pass"] for r in rows} == {passes}
        assert all(r["status"] == "ok" and r["verified"] for r in rows), [(r["label"], r["status"]) for r in rows]


def test_peers_command_line_selects_row_groups_and_the_latest_file():
    default = peers.parse_args([])
    assert default.rows == list(peer_rows.DEFAULT_ROW_GROUPS) and len(default.shapes) == 24 + 3 + 2
    assert len(peers.parse_args(["--rows", "all"]).shapes) == 24 + 3 + 2 + 5
    with pytest.raises(SystemExit):
        peers.parse_args(["--rows", "score_mods", "--softcap", "30"])
    assert default.latest_json == str(ROOT / "bench" / "results" / "latest_peers.json")
    assert ("fa4", True) in default.variants and ("cudnn", False) in default.variants
    extra = peers.parse_args(["--rows", "gqa,hdim256"])
    assert [(s["row_group"], s["heads"], s["heads_kv"], s["batch"]) for s in extra.shapes] == [
        ("gqa", 32, 8, 4), ("gqa", 32, 8, 2), ("gqa", 32, 8, 1), ("hdim256", 8, 8, 4), ("hdim256", 8, 8, 4)]
    # The old grid options alone keep their meaning (the standard grid only); --rows adds groups to them.
    assert [(s["head_dim"], s["seqlen"]) for s in peers.parse_args(["--quick"]).shapes] == [
        (128, 1024), (128, 4096), (128, 1024), (128, 4096)]
    assert len(peers.parse_args(["--quick", "--rows", "standard,gqa"]).shapes) == 4 + 3
    assert len(peers.parse_args(["--masks", "causal"]).shapes) == 12 + 3 + 1
    assert peers.parse_args(["--device", "cpu"]).latest_json is None
    assert peers.parse_args(["--latest-json", "none"]).latest_json is None
    assert peers.parse_args(["--latest-json", "/x/l.json"]).latest_json == "/x/l.json"
    # --passes: the passes timed, in the harness's order; anything else is refused.
    assert default.passes == ("fwd", "bwd")
    assert peers.parse_args(["--passes", "bwd,fwd"]).passes == ("fwd", "bwd")
    assert peers.parse_args(["--passes", "fwd"]).passes == ("fwd",)
    for wrong in ("", "forward", "fwd,dq"):
        with pytest.raises(SystemExit):
            peers.parse_args(["--passes", wrong])
    with pytest.raises(SystemExit):
        peers.parse_args(["--rows", "mqa"])
