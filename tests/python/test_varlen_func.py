"""flash_attn_varlen_func (a variable-length batch, forward and backward).
On the CPU: the argument rules, the schedules a varlen backward takes, the
frontends' mapping onto ops.fwd_varlen (stood in for), the ops' fake
implementations and autograd (gradients through the fake ops, and through CPU
reference kernels against fp64 autograd, eager and under torch.compile's
aot_eager). On an sm_90 GPU: accuracy per sequence against SDPA in fp64, lse,
gradients against a per-sequence fp64 reference, bitwise independence of a
document's result and gradients from its place in the packing and from
flash_attn_func, reruns, opcheck and torch.compile. Skipped without torch."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import dash_attn  # noqa: E402
from dash_attn import flash_attn_interface, interface, ops  # noqa: E402
import reference_attention  # noqa: E402  (tests/python, beside this file)

F = torch.nn.functional
on_sm90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
gpu = pytest.mark.skipif(not on_sm90, reason="needs an sm_90 GPU")


def offsets(lengths, device="cpu"):
    return torch.tensor([0] + lengths, dtype=torch.int32, device=device).cumsum(0, dtype=torch.int32)


def packed(lengths_q, lengths_k=None, heads_q=8, heads_kv=2, head_dim=128, device="cpu", dtype=torch.bfloat16,
           seed=0):
    """q, k, v packed along dim 0, and the arguments that describe them."""
    lengths_k = lengths_q if lengths_k is None else lengths_k
    gen = torch.Generator(device=device).manual_seed(seed)
    make = lambda total, heads: torch.randn(total, heads, head_dim, device=device, dtype=dtype, generator=gen)
    return dict(q=make(sum(lengths_q), heads_q), k=make(sum(lengths_k), heads_kv), v=make(sum(lengths_k), heads_kv),
                cu_seqlens_q=offsets(lengths_q, device), cu_seqlens_k=offsets(lengths_k, device),
                max_seqlen_q=max(lengths_q), max_seqlen_k=max(lengths_k))


@pytest.fixture
def calls(monkeypatch):
    """ops.fwd_varlen stood in for (no GPU here): records what the frontends send."""
    recorded = []

    def fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale, causal, deterministic, schedule, sm_margin, window_left, window_right, softcap,
                   sinks):
        recorded.append(dict(seqused=(seqused_q, seqused_k), max_seqlen=(max_seqlen_q, max_seqlen_k),
                             scale=softmax_scale, causal=causal, sm_margin=sm_margin,
                             schedule=(deterministic, schedule)))
        recorded[-1]["mods"] = (window_left, window_right, softcap, sinks)
        return torch.zeros_like(q), torch.zeros(q.shape[1], q.shape[0])

    monkeypatch.setattr(ops, "fwd_varlen", fwd_varlen)
    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)  # CPU tensors
    return recorded


def test_fa2_order_and_returns(calls):
    a = packed([3, 5, 0, 7])
    out = dash_attn.flash_attn_varlen_func(*a.values(), causal=True, sm_margin=4)
    assert out.shape == (15, 8, 128)
    assert calls[-1] == dict(seqused=(None, None), max_seqlen=(7, 7), scale=pytest.approx(128 ** -0.5),
                             causal=True, sm_margin=4, schedule=(True, "auto"), mods=(-1, -1, 0.0, None))
    out, lse = dash_attn.flash_attn_varlen_func(*a.values(), return_lse=True)  # FA4's keyword
    assert lse.shape == (8, 15)
    out, lse, probs = dash_attn.flash_attn_varlen_func(*a.values(), 0.0, 0.25, return_attn_probs=True)
    assert probs is None and calls[-1]["scale"] == pytest.approx(0.25)
    used = torch.tensor([1, 2, 0, 3], dtype=torch.int32)
    dash_attn.flash_attn_varlen_func(*a.values(), seqused_q=used, seqused_k=used, pack_gqa=True, num_splits=2)
    assert calls[-1]["seqused"] == (used, used)


def test_fa3_order_takes_seqused_then_softmax_scale(calls):
    a = packed([3, 5])
    used = torch.tensor([3, 4], dtype=torch.int32)
    out, lse = flash_attn_interface.flash_attn_varlen_func(*a.values(), used, None, 0.3, True, return_attn_probs=True)
    assert calls[-1]["seqused"] == (used, None) and calls[-1]["scale"] == pytest.approx(0.3)
    assert calls[-1]["causal"] is True and lse.shape == (8, 8)
    assert isinstance(flash_attn_interface.flash_attn_varlen_func(*a.values()), torch.Tensor)
    with pytest.raises(TypeError, match=r"'dropout_p': got a tensor.*flash_attn_interface.flash_attn_varlen_func"):
        dash_attn.flash_attn_varlen_func(*a.values(), used)  # FA3's order given to FA2's function


@pytest.mark.parametrize("keywords, fragment", [
    (dict(dropout_p=0.1), "dropout_p=0.1"),
    (dict(alibi_slopes=torch.ones(8)), r"alibi_slopes=<tensor of shape \(8,\)>"),
    (dict(q_descale=torch.ones(1, 2)), "q_descale"),
])
def test_features_dash_attn_lacks_are_named(calls, keywords, fragment):
    with pytest.raises(NotImplementedError, match=r"dash_attn.flash_attn_varlen_func: not supported yet: " + fragment):
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), **keywords)
    assert not calls


def test_window_softcap_and_sinks_reach_the_op(calls):
    a = packed([3, 5])
    sinks = torch.randn(8)
    dash_attn.flash_attn_varlen_func(*a.values(), 0.0, None, True, (16, 0), 30.0, learnable_sink=sinks)
    window, softcap, sent = calls[-1]["mods"][:2], calls[-1]["mods"][2], calls[-1]["mods"][3]
    assert window == (16, 0) and softcap == 30.0 and sent.dtype == torch.float32 and torch.equal(sent, sinks)
    flash_attn_interface.flash_attn_varlen_func(*a.values(), window_size=(None, 4), softcap=2,
                                                learnable_sink=sinks.bfloat16())
    assert calls[-1]["mods"][:3] == (-1, 4, 2.0) and calls[-1]["mods"][3].dtype == torch.float32
    dash_attn.flash_attn_varlen_func(*a.values())
    assert calls[-1]["mods"] == (-1, -1, 0.0, None)


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(window_size=(16,)), ValueError, "'window_size': expected (left, right)"),
    (dict(window_size=(-2, 0)), ValueError, "left = -2"),
    (dict(softcap=-1.0), ValueError, "'softcap': expected a finite number >= 0"),
    (dict(learnable_sink=torch.zeros(4)), ValueError, "'learnable_sink': expected shape (8,)"),
    (dict(learnable_sink=torch.zeros(8, dtype=torch.int32)), TypeError, "'learnable_sink': expected dtype"),
])
def test_bad_window_softcap_and_sinks_are_named(calls, keywords, error, fragment):
    with pytest.raises(error) as raised:
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), **keywords)
    assert fragment in str(raised.value) and "dash_attn.flash_attn_varlen_func" in str(raised.value)
    assert not calls


def test_dropout_refusal_points_nowhere_else_for_varlen(calls):
    # flash_attn_func's hint (a softmax scale in FA3's 4th place) cannot apply here.
    with pytest.raises(NotImplementedError) as refused:
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), 0.1)
    assert "flash_attn_interface" not in str(refused.value)


def test_fa3_order_names_its_features(calls):
    with pytest.raises(NotImplementedError, match=r"flash_attn_interface.flash_attn_varlen_func: .*attention_chunk=64"):
        flash_attn_interface.flash_attn_varlen_func(*packed([3, 5]).values(), attention_chunk=64)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['fancy'\]"):
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), fancy=1)
    assert not calls


def replaced(name, value, lengths=(3, 5, 7)):
    a = packed(list(lengths))
    a[name] = value
    return a


int64 = torch.tensor([0, 3, 8], dtype=torch.int64)
int32 = lambda *values: torch.tensor(values, dtype=torch.int32)


@pytest.mark.parametrize("arguments, keywords, error, fragment", [
    (replaced("q", torch.zeros(1, 15, 8, 128)), {}, ValueError, "'q': expected 3 dimensions (total_tokens"),
    (replaced("k", torch.zeros(15, 2, 64)), {}, ValueError, "'k': expected head_dim 128 like q"),
    (replaced("v", torch.zeros(14, 2, 128)), {}, ValueError, "'v': expected the shape of k (15, 2, 128)"),
    (replaced("q", torch.zeros(0, 8, 128)), {}, ValueError, "'q': empty tensors"),
    (replaced("k", [1, 2]), {}, TypeError, "'k': expected a torch.Tensor, got list"),
    (replaced("cu_seqlens_q", int64), {}, TypeError, "'cu_seqlens_q': expected dtype torch.int32, got torch.int64"),
    (replaced("cu_seqlens_k", int32(0, 3, 8, 15)[None]), {}, ValueError, "'cu_seqlens_k': expected 1 dimension"),
    (replaced("cu_seqlens_k", int32(0, 3, 15)), {}, ValueError,
     "'cu_seqlens_k': expected 4 entries like cu_seqlens_q (batch + 1), got 3"),
    (replaced("cu_seqlens_q", int32(0)), {}, ValueError, "'cu_seqlens_q': expected batch + 1 >= 2 entries, got 1"),
    (replaced("cu_seqlens_q", torch.zeros(4, dtype=torch.int32, device="meta")), {}, ValueError,
     "'cu_seqlens_q': expected device cpu like q, got meta"),
    (replaced("max_seqlen_q", 0), {}, ValueError, "'max_seqlen_q': expected a positive int, got 0"),
    (replaced("max_seqlen_k", 7.0), {}, TypeError, "'max_seqlen_k': expected an int"),
    (replaced("max_seqlen_k", torch.tensor(7)), {}, TypeError, "'max_seqlen_k': expected an int"),
    (replaced("max_seqlen_q", True), {}, TypeError, "'max_seqlen_q': expected an int"),
    (packed([3, 5, 7]), dict(seqused_q=int32(1, 2)), ValueError, "'seqused_q': expected 3 entries (one per sequence)"),
    (packed([3, 5, 7]), dict(seqused_k=int32(1, 2, 3).long()), TypeError, "'seqused_k': expected dtype torch.int32"),
    (packed([3, 5, 7]), dict(sm_margin=-1), ValueError, "'sm_margin': expected an int >= 0"),
    (packed([3, 5, 7]), dict(schedule="fastest"), ValueError, "argument 'schedule'"),
    (packed([3, 5, 7]), dict(schedule="atomic"), ValueError, "'atomic' is not deterministic"),
])
def test_bad_arguments_name_the_argument(calls, arguments, keywords, error, fragment):
    with pytest.raises(error) as raised:
        dash_attn.flash_attn_varlen_func(*arguments.values(), **keywords)
    assert fragment in str(raised.value) and "dash_attn.flash_attn_varlen_func" in str(raised.value)
    assert not calls


def test_flash_attn_func_rules_apply_to_the_packed_tensors():
    """check_qkv itself (not stood in for) sees the packed tensors: CPU ones are refused by name."""
    with pytest.raises(ValueError, match="flash_attn_varlen_func: argument 'q': expected a CUDA tensor"):
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values())


@pytest.mark.parametrize("keywords, sent", [
    (dict(), (True, "auto")),
    (dict(schedule="fa3"), (True, "fa3")),
    (dict(schedule="descending"), (True, "descending")),
    (dict(deterministic=False), (False, "atomic")),  # 'auto' without determinism: the atomic backward
    (dict(deterministic=False, schedule="atomic"), (False, "atomic")),
])
def test_the_backward_schedule_reaches_the_op(calls, keywords, sent):
    dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), **keywords)
    assert calls[-1]["schedule"] == sent
    flash_attn_interface.flash_attn_varlen_func(*packed([3, 5]).values(), **keywords)
    assert calls[-1]["schedule"] == sent


def test_use_deterministic_algorithms_upgrades_a_non_deterministic_request(calls):
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.warns(UserWarning, match="flash_attn_varlen_func: deterministic=False under "
                                             "torch.use_deterministic_algorithms"):
            dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), deterministic=False)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert calls[-1]["schedule"] == (True, "auto")


@pytest.mark.parametrize("schedule", ["shift", "symmetric_shift"])
def test_wave_schedules_are_refused_by_name(calls, schedule):
    message = (f"argument 'schedule': '{schedule}' is not available for variable-length batches; expected one of "
               "atomic, fa3, descending, auto")
    with pytest.raises(ValueError) as raised:
        dash_attn.flash_attn_varlen_func(*packed([3, 5]).values(), schedule=schedule)
    assert str(raised.value) == f"dash_attn.flash_attn_varlen_func: {message}"
    with pytest.raises(ValueError, match=f"flash_attn_interface.flash_attn_varlen_func: argument 'schedule': "
                                         f"'{schedule}' is not available"):
        flash_attn_interface.flash_attn_varlen_func(*packed([3, 5]).values(), schedule=schedule)
    assert not calls


def test_a_gradient_is_no_longer_refused(calls):
    a = packed([3, 5])
    a["k"].requires_grad_()
    dash_attn.flash_attn_varlen_func(*a.values())
    flash_attn_interface.flash_attn_varlen_func(*a.values())
    assert len(calls) == 2


def fake_cuda_batch(lengths_q, lengths_k, heads_q=8, heads_kv=2, head_dim=128):
    """Fake CUDA tensors (no GPU needed) laid out as packed() lays them."""
    q = torch.empty(sum(lengths_q), heads_q, head_dim, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.empty(sum(lengths_k), heads_kv, head_dim, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    cu_q, cu_k = (torch.empty(len(lengths) + 1, dtype=torch.int32, device="cuda") for lengths in (lengths_q, lengths_k))
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lengths_q),
                max_seqlen_k=max(lengths_k))


def test_fake_implementation_gives_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = fake_cuda_batch([1, 127, 0, 5], [3, 127, 2, 0])
        out, lse = ops.fwd_varlen(a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["cu_seqlens_k"], None, None, 127, 127,
                                  0.125, True, True, "auto", 0)
        assert out.shape == (133, 8, 128) and out.dtype == torch.bfloat16 and out.is_contiguous()
        assert out.device.type == "cuda" and lse.device.type == "cuda"
        assert lse.shape == (8, 133) and lse.dtype == torch.float32 and lse.is_contiguous()
        used = torch.empty(4, dtype=torch.int32, device="cuda")
        out, lse = ops.fwd_varlen(a["q"][:, :4], a["k"][:, :1], a["v"][:, :1], a["cu_seqlens_q"], a["cu_seqlens_k"],
                                  used, used, 127, 127, 0.125, False, False, "atomic", 0)
        assert out.shape == (133, 4, 128) and out.is_contiguous() and lse.shape == (4, 133)
        dout = torch.empty(133, 4, 128, dtype=torch.bfloat16, device="cuda")
        for dlse in (None, torch.empty(4, 133, device="cuda")):
            dq, dk, dv, dsinks = ops.bwd_varlen(dout, dlse, a["q"][:, :4], a["k"][:, :1], a["v"][:, :1], out, lse,
                                        a["cu_seqlens_q"], a["cu_seqlens_k"], used, used, 127, 127, 0.125, True, True,
                                        "descending", 0)
            assert dq.shape == (133, 4, 128) and dk.shape == dv.shape == (132, 1, 128) and dsinks.shape == (0,)
            assert all(g.is_contiguous() and g.dtype == torch.bfloat16 and g.device.type == "cuda"
                       for g in (dq, dk, dv))
        sinks = torch.empty(4, device="cuda")
        out, lse = ops.fwd_varlen(a["q"][:, :4], a["k"][:, :1], a["v"][:, :1], a["cu_seqlens_q"], a["cu_seqlens_k"],
                                  None, None, 127, 127, 0.125, True, True, "auto", 0, 32, 0, 20.0, sinks)
        assert out.shape == (133, 4, 128) and lse.shape == (4, 133)
        grads = ops.bwd_varlen(dout, None, a["q"][:, :4], a["k"][:, :1], a["v"][:, :1], out, lse, a["cu_seqlens_q"],
                               a["cu_seqlens_k"], None, None, 127, 127, 0.125, True, True, "auto", 0, 32, 0, 20.0,
                               sinks, True)
        assert grads[3].shape == (4,) and grads[3].dtype == torch.float32 and grads[3].device.type == "cuda"


def test_gradients_flow_through_the_fake_ops(monkeypatch):
    """Autograd registered on fwd_varlen: q, k, v get gradients of their shapes
    (through bwd_varlen's fake implementation) from out, from lse and from both.
    Fake CPU tensors (check_qkv stood in for): the autograd engine needs a
    device for fake CUDA ones."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)
    with FakeTensorMode():
        a = packed([1, 127, 0, 5], [3, 127, 2, 0])
        for name in ("q", "k", "v"):
            a[name].requires_grad_()
        for use in ("out", "lse", "both"):
            out, lse = dash_attn.flash_attn_varlen_func(*a.values(), causal=True, return_lse=True)
            loss = {"out": out.float().sum(), "lse": lse.sum(), "both": out.float().sum() + lse.sum()}[use]
            grads = torch.autograd.grad(loss, (a["q"], a["k"], a["v"]))
            assert [tuple(g.shape) for g in grads] == [(133, 8, 128), (132, 2, 128), (132, 2, 128)], use
            assert all(g.dtype == torch.bfloat16 for g in grads)


def test_the_whole_frontend_on_fake_cuda_tensors(monkeypatch):
    """Every check (check_qkv's included) and the op's fake implementation, with
    the compiled head dims stood in for (no library here)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(interface._library, "compiled_head_dims", lambda dtype: (64, 128, 256))
    with FakeTensorMode():
        a = fake_cuda_batch([1, 127, 0, 5], [3, 127, 2, 0])
        out, lse = dash_attn.flash_attn_varlen_func(*a.values(), causal=True, return_lse=True)
        assert out.shape == (133, 8, 128) and lse.shape == (8, 133)
        out = flash_attn_interface.flash_attn_varlen_func(*a.values(), a["cu_seqlens_q"][1:], None, 0.1)
        assert out.shape == (133, 8, 128)
        with pytest.raises(ValueError, match="'q': expected head_dim in \\(64, 128, 256\\)"):
            b = fake_cuda_batch([3], [3], head_dim=96)
            dash_attn.flash_attn_varlen_func(*b.values())
        with pytest.raises(ValueError, match="'k': expected heads_kv dividing heads_q = 8"):
            dash_attn.flash_attn_varlen_func(*fake_cuda_batch([3], [3], heads_kv=3).values())
        a["cu_seqlens_k"] = a["cu_seqlens_k"].cpu()
        with pytest.raises(ValueError, match="'cu_seqlens_k': expected device cuda:0 like q, got cpu"):
            dash_attn.flash_attn_varlen_func(*a.values())


@pytest.fixture
def cpu_ops(monkeypatch):
    """The varlen ops on CPU tensors by reference_attention's kernels; check_qkv
    (CUDA tensors only) stood in for. Yields the op names the calls reached."""
    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)
    with reference_attention.cpu_kernels(ops) as reached:
        yield reached


CPU_LENGTHS, CPU_LENGTHS_K = [1, 9, 0, 17, 5], [3, 9, 4, 12, 0]


def cpu_batch(seed=0, dtype=torch.float16, requires_grad=True):
    a = packed(CPU_LENGTHS, CPU_LENGTHS_K, heads_q=4, heads_kv=2, head_dim=16, dtype=dtype, seed=seed)
    for name in ("q", "k", "v"):
        a[name].requires_grad_(requires_grad)
    return a


def fp64_gradients(a, dout, dlse, causal, scale, seqused=(None, None)):
    """Autograd through the plain reference in fp64 (independent of the closed form in the CPU kernel)."""
    leaves = [a[name].detach().double().requires_grad_() for name in ("q", "k", "v")]
    out, lse = reference_attention.reference_varlen(*leaves, a["cu_seqlens_q"], a["cu_seqlens_k"], scale, causal,
                                                    *seqused)
    loss = (out * dout.double()).sum()
    if dlse is not None:
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0.0) * dlse.double()).sum()
    return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use", ["out", "lse", "both"])
def test_autograd_wiring_on_cpu_reference_kernels(cpu_ops, causal, use):
    """What autograd hands bwd_varlen (dout, dlse, the saved tensors, scale,
    causal, lengths) gives fp64 autograd's gradients; no gradient for the lengths."""
    a = cpu_batch()
    out, lse = dash_attn.flash_attn_varlen_func(*a.values(), softmax_scale=0.3, causal=causal, return_lse=True)
    gen = torch.Generator().manual_seed(1)
    dout = torch.randn(out.shape, generator=gen).to(out.dtype) if use != "lse" else torch.zeros_like(out)
    dlse = torch.randn(lse.shape, generator=gen) if use != "out" else None
    loss = 0
    if use != "lse":
        loss = loss + (out.float() * dout.float()).sum()
    if use != "out":
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0.0) * dlse).sum()
    grads = torch.autograd.grad(loss, (a["q"], a["k"], a["v"]))
    assert cpu_ops == ["fwd_varlen", "bwd_varlen"]
    for name, g, e in zip("qkv", grads, fp64_gradients(a, dout, dlse, causal, 0.3)):
        assert g.dtype == torch.float16 and g.shape == e.shape
        assert max_error(g, e) <= 2e-3 * (1 + e.abs().max().item()), f"d{name}"
    assert a["cu_seqlens_q"].grad is None and not a["cu_seqlens_q"].requires_grad


def test_seqused_rows_get_zero_gradients_on_cpu_reference_kernels(cpu_ops):
    a = cpu_batch(seed=2)
    used_q, used_k = torch.tensor([1, 4, 0, 17, 2], dtype=torch.int32), torch.tensor([2, 9, 1, 5, 0], dtype=torch.int32)
    out = dash_attn.flash_attn_varlen_func(*a.values(), causal=True, seqused_q=used_q, seqused_k=used_k)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (a["q"], a["k"], a["v"]), dout)
    exact = fp64_gradients(a, dout, None, True, 16 ** -0.5, (used_q, used_k))
    for name, g, e in zip("qkv", grads, exact):
        assert max_error(g, e) <= 2e-3 * (1 + e.abs().max().item()), f"d{name}"
    dq, dk, dv = grads
    # Sequence 1 has rows 1..9 and uses 4; sequence 3 has keys 16..27 and uses 5.
    assert not dq[5:10].any() and dq[1:5].any()
    assert not dk[21:28].any() and not dv[21:28].any() and dk[16:21].any()


def test_torch_compile_fullgraph_forward_and_backward_on_cpu_reference_kernels(cpu_ops):
    """The fake implementations and the registered autograd trace in one graph
    (aot_eager: no code generation on the CPU) and give eager's gradients."""
    torch._dynamo.reset()
    a = cpu_batch(seed=3)

    def step(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, weight):
        out, lse = dash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                    causal=True, return_lse=True)
        return (out.float() * weight).sum() + torch.where(torch.isfinite(lse), lse, 0.0).sum()

    weight = torch.randn(a["q"].shape, generator=torch.Generator().manual_seed(4)).half().float()
    eager = torch.autograd.grad(step(*a.values(), weight), (a["q"], a["k"], a["v"]))
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    for bounds in ((17, 12), (18, 20)):  # another max_seqlen: recompiled or traced as a SymInt
        args = list(a.values())[:5] + list(bounds)
        grads = torch.autograd.grad(compiled(*args, weight), (a["q"], a["k"], a["v"]))
        for name, g, e in zip("qkv", grads, eager):
            assert torch.equal(g, e), f"d{name}"
    assert "bwd_varlen" in cpu_ops


# --- On an sm_90 GPU -------------------------------------------------------------------------------------------------

RAGGED = [1, 127, 128, 129, 300, 0, 5]
# Per sequence: seqlen_k below, equal to and above seqlen_q (bottom-right causal rows with no key included).
RAGGED_K = [1, 200, 128, 64, 300, 3, 9]


def visible(seqlen_q, seqlen_k, causal, device):
    """Key j visible from row i: all, or bottom-right causal (j <= i + seqlen_k - seqlen_q)."""
    rows = torch.arange(seqlen_q, device=device)[:, None]
    cols = torch.arange(seqlen_k, device=device)[None, :]
    return (cols <= rows + seqlen_k - seqlen_q) if causal else torch.ones(seqlen_q, seqlen_k, dtype=torch.bool,
                                                                          device=device)


def sequences(a):
    """(b, q, k, v) of each sequence, cut out of the packing."""
    cu_q, cu_k = a["cu_seqlens_q"].tolist(), a["cu_seqlens_k"].tolist()
    for b in range(len(cu_q) - 1):
        yield b, a["q"][cu_q[b]:cu_q[b + 1]], a["k"][cu_k[b]:cu_k[b + 1]], a["v"][cu_k[b]:cu_k[b + 1]]


def reference(q, k, v, causal, dtype=torch.float64):
    """One sequence: out (seqlen_q, heads_q, head_dim) by SDPA with an explicit
    mask at dtype, and lse (heads_q, seqlen_q); rows without a key give 0."""
    groups = q.shape[1] // k.shape[1]
    qt, kt, vt = (t.to(dtype).transpose(0, 1) for t in (q, k.repeat_interleave(groups, 1),
                                                        v.repeat_interleave(groups, 1)))
    mask = visible(q.shape[0], k.shape[0], causal, q.device)
    if dtype == torch.float64:
        out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    else:  # naive: the scores rounded to dtype, as an unfused implementation has them
        scores = (qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ vt
    scores = (qt.double() @ kt.double().transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
    return out.nan_to_num(0.0).transpose(0, 1), torch.logsumexp(scores, dim=-1), mask.any(dim=1)


def max_error(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def same_bits(a, b):
    """Bitwise equal (NaN and -0.0 included), unlike torch.equal on floats."""
    as_int = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[a.dtype]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(as_int),
                                                                     b.contiguous().view(as_int))


def varlen(a, **keywords):
    with torch.no_grad():
        return dash_attn.flash_attn_varlen_func(*a.values(), return_lse=True, **keywords)


@gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths_k", [RAGGED, RAGGED_K], ids=["same_lengths", "other_lengths_k"])
def test_ragged_batch_matches_sdpa_per_sequence(causal, lengths_k):
    a = packed(RAGGED, lengths_k, device="cuda", seed=1)
    out, lse = varlen(a, causal=causal)
    assert out.shape == a["q"].shape and lse.shape == (8, sum(RAGGED))
    cu_q = a["cu_seqlens_q"].tolist()
    for b, q, k, v in sequences(a):
        rows = slice(cu_q[b], cu_q[b + 1])
        exact, exact_lse, has_key = reference(q, k, v, causal)
        naive, _, _ = reference(q, k, v, causal, dtype=torch.bfloat16)
        # FlashAttention-3's rule, as in test_torch_gpu.py: within 2x a naive bf16 error, plus atol.
        assert max_error(out[rows], exact) <= 2 * max_error(naive, exact) + 1e-3, f"sequence {b}"
        assert max_error(lse[:, rows][:, has_key], exact_lse[:, has_key]) < 1e-2, f"lse of sequence {b}"


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_a_document_gives_the_same_bits_wherever_it_is_packed(causal):
    """The same documents packed in two orders, behind a different first
    document: each one's out and lse are bitwise those of the other packing."""
    gen = torch.Generator(device="cuda").manual_seed(2)
    lengths = [300, 1, 129, 64, 200, 77]
    documents = [[torch.randn(n, h, 128, device="cuda", dtype=torch.bfloat16, generator=gen) for h in (8, 2, 2)]
                 for n in lengths]

    def pack(order):
        chosen = [documents[i] for i in order]
        return dict(q=torch.cat([d[0] for d in chosen]), k=torch.cat([d[1] for d in chosen]),
                    v=torch.cat([d[2] for d in chosen]), cu_seqlens_q=offsets([lengths[i] for i in order], "cuda"),
                    cu_seqlens_k=offsets([lengths[i] for i in order], "cuda"), max_seqlen_q=300, max_seqlen_k=300)

    first_order, second_order = [0, 1, 2, 3, 4], [5, 4, 2, 0, 3, 1]  # document 5 shifts every offset
    results = []
    for order in (first_order, second_order):
        a = pack(order)
        out, lse = varlen(a, causal=causal)
        starts = dict(zip(order, a["cu_seqlens_q"].tolist()))
        results.append({i: (out[starts[i]:starts[i] + lengths[i]], lse[:, starts[i]:starts[i] + lengths[i]])
                        for i in order})
    for i in first_order:
        assert same_bits(results[0][i][0], results[1][i][0]), f"out of document {i}"
        assert same_bits(results[0][i][1], results[1][i][1]), f"lse of document {i}"


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_each_sequence_equals_flash_attn_func_on_it_alone(causal):
    a = packed(RAGGED, RAGGED_K, device="cuda", seed=3)
    out, lse = varlen(a, causal=causal)
    cu_q = a["cu_seqlens_q"].tolist()
    for b, q, k, v in sequences(a):
        if q.shape[0] == 0 or k.shape[0] == 0:
            continue
        alone, alone_lse = dash_attn.flash_attn_func(q[None], k[None], v[None], causal=causal, return_lse=True)
        rows = slice(cu_q[b], cu_q[b + 1])
        assert torch.equal(out[rows], alone[0]), f"out of sequence {b}"
        assert same_bits(lse[:, rows], alone_lse[0]), f"lse of sequence {b}"


@gpu
def test_seqused_limits_each_sequence():
    """seqused_q / seqused_k (FA3's used lengths) cut each sequence short: its
    first rows are those of the shortened sequence, against SDPA."""
    a = packed(RAGGED, device="cuda", seed=4)
    used = [1, 100, 128, 1, 250, 0, 3]
    used_k = [1, 127, 60, 129, 300, 0, 5]
    out, lse = varlen(a, causal=True, seqused_q=torch.tensor(used, dtype=torch.int32, device="cuda"),
                      seqused_k=torch.tensor(used_k, dtype=torch.int32, device="cuda"))
    cu_q = a["cu_seqlens_q"].tolist()
    for b, q, k, v in sequences(a):
        exact, exact_lse, has_key = reference(q[:used[b]], k[:used_k[b]], v[:used_k[b]], True)
        naive, _, _ = reference(q[:used[b]], k[:used_k[b]], v[:used_k[b]], True, dtype=torch.bfloat16)
        rows = slice(cu_q[b], cu_q[b] + used[b])
        assert max_error(out[rows], exact) <= 2 * max_error(naive, exact) + 1e-3, f"sequence {b}"
        assert max_error(lse[:, rows][:, has_key], exact_lse[:, has_key]) < 1e-2, f"lse of sequence {b}"


@gpu
def test_custom_op_passes_opcheck():
    a = packed([1, 127, 0, 130], [5, 127, 3, 64], heads_q=4, heads_kv=2, head_dim=64, device="cuda")
    tensors = [a[name] for name in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")]
    used = torch.tensor([1, 100, 0, 64], dtype=torch.int32, device="cuda")
    for seqused in ((None, None), (used, used)):
        torch.library.opcheck(ops.fwd_varlen, (*tensors, *seqused, 130, 127, 0.125, True, True, "auto", 0))
        # Inputs that need a gradient: opcheck runs the registered autograd (eager against AOT) too.
        leaves = [t.detach().requires_grad_() for t in tensors[:3]] + tensors[3:]
        torch.library.opcheck(ops.fwd_varlen, (*leaves, *seqused, 130, 127, 0.125, True, True, "descending", 0))


@gpu
def test_backward_op_passes_opcheck():
    """bwd_varlen is the backward formula itself (none of its own): checked on plain tensors."""
    a = packed([1, 127, 0, 130], [5, 127, 3, 64], heads_q=4, heads_kv=2, head_dim=64, device="cuda")
    q, k, v, cu_q, cu_k = (a[name] for name in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"))
    used = torch.tensor([1, 100, 0, 64], dtype=torch.int32, device="cuda")
    for seqused in ((None, None), (used, used)):
        out, lse = ops.fwd_varlen(q, k, v, cu_q, cu_k, *seqused, 130, 127, 0.125, True, True, "auto", 0)
        for dlse in (None, torch.randn_like(lse)):
            for deterministic, schedule in ((True, "auto"), (True, "fa3"), (False, "atomic")):
                torch.library.opcheck(ops.bwd_varlen, (torch.randn_like(out), dlse, q, k, v, out, lse, cu_q, cu_k,
                                                       *seqused, 130, 127, 0.125, True, deterministic, schedule, 0))


@gpu
def test_torch_compile_fullgraph_under_no_grad():
    a = packed(RAGGED, RAGGED_K, device="cuda", seed=5)
    for name in ("q", "k", "v"):
        a[name].requires_grad_()  # no autograd graph under no_grad

    @torch.compile(fullgraph=True)
    def attend(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        # The attention output itself: a reduction after it would be fused by
        # Inductor in another order than eager's, which is not the kernel's bits.
        return dash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                causal=True)

    with torch.no_grad():
        eager = dash_attn.flash_attn_varlen_func(*a.values(), causal=True)
        assert torch.equal(attend(*a.values()), eager)
        # A changed max_seqlen can reach the second compilation as a SymInt; any
        # bound >= the longest sequence gives the same result.
        assert torch.equal(attend(*list(a.values())[:5], 301, 302), eager)



# --- The backward on an sm_90 GPU ------------------------------------------------------------------------------------

# Lengths 0 and 1, tile boundaries (64, 128 +- 1) and a long one; keys shorter, equal and longer per sequence.
GRAD_LENGTHS = [1, 63, 64, 65, 127, 128, 129, 0, 300, 5]
GRAD_LENGTHS_K = [1, 64, 200, 65, 128, 129, 127, 3, 257, 0]


def packed_leaves(lengths_q, lengths_k, head_dim, dtype, seed, heads_q=8, heads_kv=2):
    a = packed(lengths_q, lengths_k, heads_q=heads_q, heads_kv=heads_kv, head_dim=head_dim, device="cuda",
               dtype=dtype, seed=seed)
    for name in ("q", "k", "v"):
        a[name].requires_grad_()
    return a


def varlen_gradients(a, dout, dlse, **keywords):
    """(out, lse, dq, dk, dv) of the packed batch; dlse None: lse unused."""
    out, lse = dash_attn.flash_attn_varlen_func(*a.values(), return_lse=True, **keywords)
    if dlse is None:
        grads = torch.autograd.grad(out, (a["q"], a["k"], a["v"]), dout)
    else:
        loss = (out.float() * dout.float()).sum() + (torch.where(torch.isfinite(lse), lse, 0.0) * dlse).sum()
        grads = torch.autograd.grad(loss, (a["q"], a["k"], a["v"]))
    return (out.detach(), lse.detach(), *grads)


def reference_gradients(a, dout, dlse, causal, dtype, seqused=(None, None)):
    """Gradients of each sequence run alone through plain torch math at dtype
    (fp64: the exact reference; the inputs' dtype: the naive error bound)."""
    leaves = [a[name].detach().to(dtype).requires_grad_() for name in ("q", "k", "v")]
    out, lse = reference_attention.reference_varlen(*leaves, a["cu_seqlens_q"], a["cu_seqlens_k"], None, causal,
                                                    *seqused, dtype=dtype)
    loss = (out.double() * dout.double()).sum()
    if dlse is not None:
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0.0).double() * dlse.double()).sum()
    return torch.autograd.grad(loss, leaves)


def assert_gradients_close(a, grads, exact, naive, seqused=(None, None)):
    """FlashAttention-3's rule per sequence and per gradient: within 2x a naive
    implementation's error at the inputs' precision, plus a small atol."""
    cu = {"q": reference_attention.spans(a["cu_seqlens_q"], seqused[0]),
          "k": reference_attention.spans(a["cu_seqlens_k"], seqused[1]), "v": None}
    cu["v"] = cu["k"]
    for name, g, e, n in zip("qkv", grads, exact, naive):
        for b, (start, used, slot) in enumerate(cu[name]):
            rows = slice(start, start + used)
            bound = 2 * max_error(n[rows], e[rows]) + 1e-3 * (1 + (e[rows].abs().max().item() if used else 0))
            assert max_error(g[rows], e[rows]) <= bound, f"d{name} of sequence {b}"
            assert not g[start + used:start + slot].any(), f"d{name} of sequence {b}: rows past its used length"


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths_k", [GRAD_LENGTHS, GRAD_LENGTHS_K], ids=["same_lengths", "other_lengths_k"])
def test_gradients_match_fp64_per_sequence(dtype, head_dim, causal, lengths_k):
    if head_dim not in interface._library.compiled_head_dims(str(dtype), interface._library.DASH_PASS_BACKWARD):
        pytest.skip(f"no {dtype} head_dim {head_dim} backward in this build (DASH_KERNELS)")
    a = packed_leaves(GRAD_LENGTHS, lengths_k, head_dim, dtype, seed=11)
    gen = torch.Generator(device="cuda").manual_seed(12)
    dout = torch.randn(a["q"].shape, device="cuda", dtype=dtype, generator=gen)
    _, _, *grads = varlen_gradients(a, dout, None, causal=causal)
    exact = reference_gradients(a, dout, None, causal, torch.float64)
    naive = reference_gradients(a, dout, None, causal, dtype)
    assert_gradients_close(a, grads, exact, naive)


@gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("use_out", [True, False])
def test_lse_carries_its_gradient(causal, use_out):
    """The varlen lse's gradient reaches q and k (ring attention over packed
    documents), with and without out's, against fp64 autograd."""
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 128, torch.bfloat16, seed=13)
    gen = torch.Generator(device="cuda").manual_seed(14)
    dout = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    dout = dout if use_out else torch.zeros_like(dout)
    dlse = torch.randn(8, a["q"].shape[0], device="cuda", generator=gen)
    out, lse = dash_attn.flash_attn_varlen_func(*a.values(), causal=causal, return_lse=True)
    loss = (torch.where(torch.isfinite(lse), lse, 0.0) * dlse).sum()
    if use_out:
        loss = loss + (out.float() * dout.float()).sum()
    grads = torch.autograd.grad(loss, (a["q"], a["k"], a["v"]), allow_unused=True)
    exact = reference_gradients(a, dout, dlse, causal, torch.float64)
    for name, g, e in zip("qkv", grads, exact):
        g = torch.zeros_like(e) if g is None else g
        assert max_error(g, e) / (e.abs().max().item() + 1e-6) < 2e-2, f"d{name}"


@gpu
def test_seqused_gradients_and_untouched_rows():
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 128, torch.bfloat16, seed=15)
    used_q = [1, 40, 64, 1, 100, 128, 0, 0, 250, 5]
    used_k = [1, 64, 100, 65, 128, 2, 127, 3, 257, 0]
    seqused = tuple(torch.tensor(u, dtype=torch.int32, device="cuda") for u in (used_q, used_k))
    dout = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16,
                       generator=torch.Generator(device="cuda").manual_seed(16))
    _, _, *grads = varlen_gradients(a, dout, None, causal=True, seqused_q=seqused[0], seqused_k=seqused[1])
    exact = reference_gradients(a, dout, None, True, torch.float64, seqused)
    naive = reference_gradients(a, dout, None, True, torch.bfloat16, seqused)
    assert_gradients_close(a, grads, exact, naive, seqused)


DOCUMENT_LENGTHS = [300, 1, 129, 64, 200, 77, 0, 128]


def documents(seed, head_dim=128, dtype=torch.bfloat16):
    """Per document: q, k, v, dout, dlse, on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    made = []
    for n in DOCUMENT_LENGTHS:
        q, k, v, dout = (torch.randn(n, h, head_dim, device="cuda", dtype=dtype, generator=gen) for h in (8, 2, 2, 8))
        made.append((q, k, v, dout, torch.randn(8, n, device="cuda", generator=gen)))
    return made


def packed_gradients(docs, order, **keywords):
    """Each document's (out, lse, dq, dk, dv) from one packed call over `order`."""
    chosen = [docs[i] for i in order]
    lengths = [DOCUMENT_LENGTHS[i] for i in order]
    q, k, v = (torch.cat([d[j] for d in chosen]).requires_grad_() for j in range(3))
    dout, dlse = torch.cat([d[3] for d in chosen]), torch.cat([d[4] for d in chosen], dim=1)
    a = dict(q=q, k=k, v=v, cu_seqlens_q=offsets(lengths, "cuda"), cu_seqlens_k=offsets(lengths, "cuda"),
             max_seqlen_q=max(max(lengths), 1), max_seqlen_k=max(max(lengths), 1))
    out, lse, dq, dk, dv = varlen_gradients(a, dout, dlse, **keywords)
    starts = dict(zip(order, a["cu_seqlens_q"].tolist()))
    rows = {i: slice(starts[i], starts[i] + DOCUMENT_LENGTHS[i]) for i in order}
    return {i: (out[rows[i]], lse[:, rows[i]], dq[rows[i]], dk[rows[i]], dv[rows[i]]) for i in order}


@gpu
@pytest.mark.parametrize("schedule", ["auto", "fa3", "descending"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_documents_gradients_are_the_same_bits_wherever_it_is_packed(schedule, causal):
    """Each document's dq, dk, dv (and out, lse) are bitwise the same alone (a
    batch of one), packed in one order and packed in another behind a
    different first document (every offset shifts); the empty document 6
    sits at the start, in the middle and at the end."""
    docs = documents(seed=17)
    packings = [[0, 1, 2, 3, 4, 6], [5, 4, 2, 6, 0, 7, 3, 1], [6, 3, 0, 7, 1, 2, 4, 5]]
    results = [packed_gradients(docs, order, causal=causal, schedule=schedule) for order in packings]
    for i in range(len(DOCUMENT_LENGTHS)):
        if DOCUMENT_LENGTHS[i] == 0:  # alone it is an empty tensor, which the function refuses
            continue
        alone = packed_gradients(docs, [i], causal=causal, schedule=schedule)[i]
        for result in results:
            if i not in result:
                continue
            for name, x, y in zip(("out", "lse", "dq", "dk", "dv"), alone, result[i]):
                assert same_bits(x, y), f"{name} of document {i}"


@gpu
@pytest.mark.parametrize("schedule", ["fa3", "descending"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_documents_gradients_equal_flash_attn_func_on_it_alone(schedule, causal):
    """The C++ API's claim (api.hpp): backward_varlen on a sequence equals
    backward() on that sequence alone, bitwise, under the same schedule."""
    docs = documents(seed=18)
    result = packed_gradients(docs, list(range(len(DOCUMENT_LENGTHS))), causal=causal, schedule=schedule)
    for i, (q, k, v, dout, dlse) in enumerate(docs):
        if DOCUMENT_LENGTHS[i] == 0:
            continue
        leaves = [t[None].clone().requires_grad_() for t in (q, k, v)]
        out, lse = dash_attn.flash_attn_func(*leaves, causal=causal, schedule=schedule, return_lse=True)
        loss = (out.float() * dout[None].float()).sum() + (lse * dlse[None]).sum()
        grads = torch.autograd.grad(loss, leaves)
        for name, x, y in zip(("dq", "dk", "dv"), grads, result[i][2:]):
            assert same_bits(x[0], y), f"{name} of document {i}"


@gpu
@pytest.mark.parametrize("keywords", [dict(), dict(schedule="fa3"), dict(schedule="descending")],
                         ids=["auto", "fa3", "descending"])
def test_reruns_are_bitwise_equal(keywords):
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 128, torch.bfloat16, seed=19)
    gen = torch.Generator(device="cuda").manual_seed(20)
    dout = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    dlse = torch.randn(8, a["q"].shape[0], device="cuda", generator=gen)
    first = varlen_gradients(a, dout, dlse, causal=True, **keywords)
    for _ in range(3):
        again = varlen_gradients(a, dout, dlse, causal=True, **keywords)
        for name, x, y in zip(("out", "lse", "dq", "dk", "dv"), first, again):
            assert same_bits(x, y), name


@gpu
def test_atomic_backward_is_close_to_the_deterministic_one():
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 64, torch.bfloat16, seed=21)
    dout = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16,
                       generator=torch.Generator(device="cuda").manual_seed(22))
    _, _, *deterministic = varlen_gradients(a, dout, None, causal=True)
    _, _, *atomic = varlen_gradients(a, dout, None, causal=True, deterministic=False)
    exact = reference_gradients(a, dout, None, True, torch.float64)
    naive = reference_gradients(a, dout, None, True, torch.bfloat16)
    assert_gradients_close(a, atomic, exact, naive)
    for name, x, y in zip("qkv", deterministic, atomic):
        assert max_error(x, y) <= 2e-2 * (1 + y.abs().max().item()), f"d{name}"


@gpu
def test_torch_compile_fullgraph_forward_and_backward():
    """A compiled loss over out and lse, backward through bwd_varlen: the
    gradients are bitwise eager's (the loss's weights are exact in bf16, so
    dout and dlse reach the kernel with the same bits)."""
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 128, torch.bfloat16, seed=23)
    gen = torch.Generator(device="cuda").manual_seed(24)
    weight = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16, generator=gen).float()
    weight_lse = torch.randn(8, a["q"].shape[0], device="cuda", generator=gen)

    def loss(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        out, lse = dash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                    causal=True, return_lse=True)
        return (out.float() * weight).sum() + (torch.where(torch.isfinite(lse), lse, 0.0) * weight_lse).sum()

    leaves = (a["q"], a["k"], a["v"])
    eager = torch.autograd.grad(loss(*a.values()), leaves)
    compiled = torch.compile(loss, fullgraph=True)
    for bounds in ((300, 257), (301, 302)):  # a changed max_seqlen may arrive as a SymInt
        grads = torch.autograd.grad(compiled(*list(a.values())[:5], *bounds), leaves)
        for name, g, e in zip("qkv", grads, eager):
            assert same_bits(g, e), f"d{name}"


@gpu
def test_cuda_graph_capture_and_replay_of_the_backward():
    a = packed_leaves(GRAD_LENGTHS, GRAD_LENGTHS_K, 128, torch.bfloat16, seed=25)
    dout = torch.randn(a["q"].shape, device="cuda", dtype=torch.bfloat16,
                       generator=torch.Generator(device="cuda").manual_seed(26))
    step = lambda: varlen_gradients(a, dout, None, causal=True)[2:]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside capture
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    graph.replay()
    for name, x, y in zip("qkv", captured, step()):
        assert same_bits(x, y), f"d{name}"
