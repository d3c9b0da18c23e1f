"""Sliding windows, softcap and learnable attention sinks (issue 18) through
flash_attn_func and flash_attn_varlen_func. On the CPU: the autograd wiring
(what reaches the backward ops, the sinks' gradient included) on
reference_attention's CPU kernels against fp64 autograd through the plain
reference, torch.compile (aot_eager) and the fake implementations, and the
reference's window against transformers' sliding-window rule. On an sm_90 GPU:
out, lse and every gradient (dsinks included) against the fp64 reference
within FlashAttention-3's rule (2x a naive same-precision implementation's
error + atol), varlen per sequence, bitwise reruns of a windowed causal
backward, opcheck. Skipped without torch."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import dash_attn  # noqa: E402
from dash_attn import interface, ops  # noqa: E402
import reference_attention as ref  # noqa: E402  (tests/python, beside this file)

on_sm90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
gpu = pytest.mark.skipif(not on_sm90, reason="needs an sm_90 GPU")

# (causal, window_size, softcap, sinks): each feature alone and together.
MODS = [
    (True, (5, 0), 0.0, False),
    (False, (3, 2), 0.0, False),
    (False, (-1, -1), 4.0, False),
    (False, (-1, -1), 0.0, True),
    (True, (7, -1), 3.0, True),       # causal: right = 0 whatever window_right says
    (False, (0, 0), 0.0, True),       # a diagonal band: with seqlen_k < seqlen_q rows without a key
]
MOD_IDS = ["causal-window", "window", "softcap", "sinks", "causal-window-softcap-sinks", "diagonal-sinks"]


def max_error(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def sink_logits(heads, device, seed=7):
    return (torch.randn(heads, generator=torch.Generator().manual_seed(seed)) * 2).to(device).requires_grad_()


def fixed_reference(q, k, v, causal, window, softcap, sinks, scale=None, dtype=torch.float64):
    """(out, lse) of a (batch, seqlen, heads, head_dim) problem by the reference, differentiable."""
    pairs = [ref.attend(q[b], k[b], v[b], scale, causal, dtype, window, softcap, sinks) for b in range(q.shape[0])]
    return torch.stack([o for o, _ in pairs]), torch.stack([lse for _, lse in pairs])


def finite(lse):
    return torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))


def loss_of(out, lse, dout, dlse):
    return (out.double() * dout.double()).sum() + (finite(lse).double() * dlse.double()).sum()


# --- CPU: autograd wiring on the reference kernels --------------------------------------------------------------------

@pytest.fixture
def cpu_ops(monkeypatch):
    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)  # CPU tensors
    with ref.cpu_kernels(ops) as reached:
        yield reached


def cpu_inputs(batch=2, seqlen_q=13, seqlen_k=9, heads_q=4, heads_kv=2, head_dim=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda s, h: torch.randn(batch, s, h, head_dim, generator=gen).half().requires_grad_()
    return make(seqlen_q, heads_q), make(seqlen_k, heads_kv), make(seqlen_k, heads_kv)


@pytest.mark.parametrize("causal, window, softcap, with_sinks", MODS, ids=MOD_IDS)
def test_fixed_length_gradients_on_cpu_reference_kernels(cpu_ops, causal, window, softcap, with_sinks):
    """dq, dk, dv and dsinks through dash_attn::fwd/bwd's autograd (the
    closed form of the CPU kernel) equal fp64 autograd through the reference."""
    q, k, v = cpu_inputs()
    sinks = sink_logits(4, "cpu") if with_sinks else None
    out, lse = dash_attn.flash_attn_func(q, k, v, softmax_scale=0.3, causal=causal, window_size=window,
                                         softcap=softcap, learnable_sink=sinks, return_lse=True)
    gen = torch.Generator().manual_seed(1)
    dout, dlse = torch.randn(out.shape, generator=gen).half(), torch.randn(lse.shape, generator=gen)
    leaves = (q, k, v) + ((sinks,) if with_sinks else ())
    grads = torch.autograd.grad(loss_of(out, lse, dout, dlse), leaves)
    assert cpu_ops == ["fwd", "bwd"]
    exact_leaves = [t.detach().double().requires_grad_() for t in leaves]
    exact_out, exact_lse = fixed_reference(*exact_leaves[:3], causal, window, softcap,
                                           exact_leaves[3] if with_sinks else None, 0.3)
    assert max_error(out, exact_out) < 2e-3 and max_error(finite(lse), finite(exact_lse)) < 1e-5
    assert torch.equal(torch.isfinite(lse), torch.isfinite(exact_lse))
    exact = torch.autograd.grad(loss_of(exact_out, exact_lse, dout, dlse), exact_leaves)
    for name, g, e in zip(["dq", "dk", "dv", "dsinks"], grads, exact):
        assert g.dtype == (torch.float32 if name == "dsinks" else torch.float16)
        assert max_error(g, e) <= 3e-3 * (1 + e.abs().max().item()), name


def test_rows_without_a_key_get_the_sink_as_lse_on_cpu_reference_kernels(cpu_ops):
    q, k, v = cpu_inputs(seqlen_q=13, seqlen_k=9)
    sinks = sink_logits(4, "cpu")
    out, lse = dash_attn.flash_attn_func(q, k, v, window_size=(0, 0), learnable_sink=sinks, return_lse=True)
    # Bottom-right aligned: row i sees key i - 4 only, so rows 0..3 see none.
    assert not out[:, :4].any() and out[:, 4:].abs().sum() > 0
    assert torch.equal(lse[:, :, :4], sinks.detach()[None, :, None].expand(2, 4, 4))


def varlen_inputs(lengths_q=(1, 9, 0, 17, 5), lengths_k=(3, 9, 4, 12, 0), seed=0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda total, heads: torch.randn(total, heads, 16, generator=gen).half().requires_grad_()
    offsets = lambda lengths: torch.tensor([0, *lengths], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return (make(sum(lengths_q), 4), make(sum(lengths_k), 2), make(sum(lengths_k), 2), offsets(lengths_q),
            offsets(lengths_k), max(lengths_q), max(lengths_k))


@pytest.mark.parametrize("causal, window, softcap, with_sinks", MODS, ids=MOD_IDS)
def test_varlen_gradients_on_cpu_reference_kernels(cpu_ops, causal, window, softcap, with_sinks):
    """The varlen ops' autograd: per-sequence windows, dsinks summed over every sequence."""
    args = varlen_inputs()
    q, k, v, cu_q, cu_k = args[:5]
    sinks = sink_logits(4, "cpu") if with_sinks else None
    out, lse = dash_attn.flash_attn_varlen_func(*args, softmax_scale=0.3, causal=causal, window_size=window,
                                                softcap=softcap, learnable_sink=sinks, return_lse=True)
    gen = torch.Generator().manual_seed(2)
    dout, dlse = torch.randn(out.shape, generator=gen).half(), torch.randn(lse.shape, generator=gen)
    leaves = (q, k, v) + ((sinks,) if with_sinks else ())
    grads = torch.autograd.grad(loss_of(out, lse, dout, dlse), leaves)
    assert cpu_ops == ["fwd_varlen", "bwd_varlen"]
    exact_leaves = [t.detach().double().requires_grad_() for t in leaves]
    exact_out, exact_lse = ref.reference_varlen(*exact_leaves[:3], cu_q, cu_k, 0.3, causal, window=window,
                                                softcap=softcap, sinks=exact_leaves[3] if with_sinks else None)
    assert max_error(out, exact_out) < 2e-3
    exact = torch.autograd.grad(loss_of(exact_out, exact_lse, dout, dlse), exact_leaves)
    for name, g, e in zip(["dq", "dk", "dv", "dsinks"], grads, exact):
        assert max_error(g, e) <= 3e-3 * (1 + e.abs().max().item()), name


@pytest.mark.parametrize("use", ["out", "lse", "both"])
def test_eager_function_wiring_matches_the_ops_autograd(cpu_ops, monkeypatch, use):
    """ops._eager_function's setup and backward routing (the eager path's), built here on the ops
    themselves so that the CPU reference kernels run: the same out, lse and gradients (sinks
    included) as the op's registered autograd."""
    eager = ops._eager_function("CpuEager", ops.fwd, ops._setup_context, ops._backward, ops.bwd)

    def run(path):
        monkeypatch.setattr(ops, "_eager", lambda inputs: "function" if path == "eager" else None)
        monkeypatch.setattr(ops, "_EagerFwd", eager)
        q, k, v = cpu_inputs(seed=4)
        sinks = sink_logits(4, "cpu")
        out, lse = dash_attn.flash_attn_func(q, k, v, causal=True, window_size=(5, 0), softcap=3.0,
                                             learnable_sink=sinks, return_lse=True)
        assert (type(out.grad_fn).__name__ == "CpuEagerBackward") == (path == "eager")
        dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).half()
        loss = {"out": (out.float() * dout).sum(), "lse": finite(lse).sum(),
                "both": (out.float() * dout).sum() + finite(lse).sum()}[use]
        return (out, lse) + torch.autograd.grad(loss, (q, k, v, sinks))

    for name, a, b in zip(["out", "lse", "dq", "dk", "dv", "dsinks"], run("eager"), run("op")):
        assert torch.equal(a, b), name


def test_sinks_without_grad_send_no_dsinks(cpu_ops, monkeypatch):
    """A sinks tensor that needs no gradient: bwd is asked for none (sinks_grad False)."""
    asked = []
    backward = ops.bwd

    def recording(*args):
        asked.append(args[-1])
        return backward(*args)

    monkeypatch.setattr(ops, "bwd", recording)
    q, k, v = cpu_inputs()
    for sinks in (torch.zeros(4), sink_logits(4, "cpu")):
        out = dash_attn.flash_attn_func(q, k, v, learnable_sink=sinks)
        torch.autograd.grad(out.float().sum(), (q,) + ((sinks,) if sinks.requires_grad else ()))
    assert asked == [False, True]


def test_torch_compile_fullgraph_with_sinks_on_cpu_reference_kernels(cpu_ops):
    torch._dynamo.reset()
    q, k, v = cpu_inputs(seed=3)
    sinks = sink_logits(4, "cpu")

    def step(q, k, v, sinks):
        out, lse = dash_attn.flash_attn_func(q, k, v, causal=True, window_size=(4, 0), softcap=2.0,
                                             learnable_sink=sinks, return_lse=True)
        return out.float().sum() + lse.sum()

    eager = torch.autograd.grad(step(q, k, v, sinks), (q, k, v, sinks))
    compiled = torch.autograd.grad(torch.compile(step, fullgraph=True, backend="aot_eager")(q, k, v, sinks),
                                   (q, k, v, sinks))
    for name, g, e in zip(["dq", "dk", "dv", "dsinks"], compiled, eager):
        assert torch.equal(g, e), name


def test_fake_ops_give_the_sinks_gradient_its_shape(monkeypatch):
    """Through the fake implementations: autograd on fake CPU tensors
    (check_qkv stood in for: the autograd engine needs a device for fake CUDA
    ones), the ops' outputs on fake CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 64, h, 128, dtype=torch.bfloat16, requires_grad=True) for h in (8, 2, 2))
        sinks = torch.empty(8, requires_grad=True)
        lengths = torch.empty(3, dtype=torch.int32)
        for function, arguments in ((dash_attn.flash_attn_func, (q, k, v)),
                                    (dash_attn.flash_attn_varlen_func, (q[0], k[0], v[0], lengths, lengths, 40, 40))):
            out = function(*arguments, causal=True, window_size=(16, 0), softcap=30.0, learnable_sink=sinks)
            grads = torch.autograd.grad(out.float().sum(), (q, k, sinks))
            assert grads[2].shape == (8,) and grads[2].dtype == torch.float32
        q, k, v = (torch.empty(2, 64, h, 128, dtype=torch.bfloat16, device="cuda") for h in (8, 2, 2))
        out, lse = ops.fwd(q, k, v, 0.1, True, True, "auto", 0, 16, 0, 30.0, torch.empty(8, device="cuda"))
        assert out.shape == q.shape and lse.shape == (2, 8, 64)
        for sinks, sinks_grad, shape in ((None, False, (0,)), (torch.empty(8, device="cuda"), False, (0,)),
                                         (torch.empty(8, device="cuda"), True, (8,))):
            grads = ops.bwd(out, None, q, k, v, out, lse, 0.1, True, True, "auto", 0, 16, 0, 30.0, sinks, sinks_grad)
            assert grads[3].shape == shape and grads[3].device.type == "cuda"


def test_reference_window_is_transformers_sliding_window():
    """transformers: key visible iff 0 <= q_pos - k_pos < sliding_window;
    FlashAttention's (sliding_window - 1, 0) with causal, as the integration sends."""
    positions = torch.arange(20)
    for window in (1, 4, 19):
        distance = positions[:, None] - positions[None, :]
        assert torch.equal(ref.visible(20, 20, True, "cpu", (window - 1, 0)), (distance >= 0) & (distance < window))
    # Bottom-right alignment with fewer queries (a decoding step with a cache): the last row's band.
    assert ref.visible(1, 10, True, "cpu", (3, 0)).nonzero()[:, 1].tolist() == [6, 7, 8, 9]


# --- On an sm_90 GPU -------------------------------------------------------------------------------------------------

def gpu_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, seed=0, dtype=torch.bfloat16):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda s, h: torch.randn(batch, s, h, head_dim, device="cuda", dtype=dtype, generator=gen).requires_grad_()
    return make(seqlen_q, heads_q), make(seqlen_k, heads_kv), make(seqlen_k, heads_kv)


GPU_SHAPES = [(2, 300, 300, 4, 2, 128), (1, 257, 190, 8, 2, 64), (1, 190, 400, 2, 1, 256)]
GPU_MODS = [
    (True, (128, 0), 0.0, False),
    (False, (64, 32), 0.0, False),
    (False, (-1, -1), 30.0, False),
    (True, (-1, -1), 0.0, True),
    (True, (100, 0), 20.0, True),
    (False, (0, 0), 0.0, True),   # one key per row; rows of seqlen_k < seqlen_q see none
]
GPU_MOD_IDS = ["causal-window", "window", "softcap", "causal-sinks", "window-softcap-sinks", "diagonal-sinks"]


@gpu
@pytest.mark.parametrize("causal, window, softcap, with_sinks", GPU_MODS, ids=GPU_MOD_IDS)
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_forward_and_gradients_match_the_fp64_reference(shape, causal, window, softcap, with_sinks):
    q, k, v = gpu_inputs(*shape)
    sinks = sink_logits(shape[3], "cuda") if with_sinks else None
    out, lse = dash_attn.flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap,
                                         learnable_sink=sinks, return_lse=True)
    dout = torch.randn_like(out)
    leaves = (q, k, v) + ((sinks,) if with_sinks else ())
    grads = torch.autograd.grad((out.float() * dout.float()).sum(), leaves)
    results = {}
    for dtype in (torch.float64, torch.bfloat16):  # exact, and naive in bf16
        ref_leaves = [t.detach().to(dtype if t.dtype != torch.float32 else torch.float32).requires_grad_()
                      if dtype != torch.float64 else t.detach().double().requires_grad_() for t in leaves]
        ref_out, ref_lse = fixed_reference(*ref_leaves[:3], causal, window, softcap,
                                           ref_leaves[3] if with_sinks else None, dtype=dtype)
        ref_grads = torch.autograd.grad((ref_out.double() * dout.double()).sum(), ref_leaves)
        results[dtype] = (ref_out, ref_lse, ref_grads)
    exact_out, exact_lse, exact_grads = results[torch.float64]
    naive_out, _, naive_grads = results[torch.bfloat16]
    assert max_error(out, exact_out) <= 2 * max_error(naive_out, exact_out) + 1e-3
    assert torch.equal(torch.isfinite(lse), torch.isfinite(exact_lse))
    assert max_error(finite(lse), finite(exact_lse)) < 1e-2
    for name, g, e, n in zip(["dq", "dk", "dv", "dsinks"], grads, exact_grads, naive_grads):
        assert max_error(g, e) <= 2 * max_error(n, e) + 1e-3 * (1 + e.abs().max().item()), name


@gpu
@pytest.mark.parametrize("causal, window, softcap, with_sinks", GPU_MODS, ids=GPU_MOD_IDS)
def test_varlen_matches_each_sequence_alone(causal, window, softcap, with_sinks):
    lengths_q, lengths_k = [1, 127, 300, 0, 64], [3, 200, 300, 9, 17]
    gen = torch.Generator(device="cuda").manual_seed(4)
    make = lambda total, heads: torch.randn(total, heads, 128, device="cuda", dtype=torch.bfloat16,
                                            generator=gen).requires_grad_()
    q, k, v = make(sum(lengths_q), 8), make(sum(lengths_k), 2), make(sum(lengths_k), 2)
    cu = lambda lengths: torch.tensor([0, *lengths], dtype=torch.int32, device="cuda").cumsum(0, dtype=torch.int32)
    sinks = sink_logits(8, "cuda") if with_sinks else None
    out, lse = dash_attn.flash_attn_varlen_func(q, k, v, cu(lengths_q), cu(lengths_k), max(lengths_q), max(lengths_k),
                                                causal=causal, window_size=window, softcap=softcap,
                                                learnable_sink=sinks, return_lse=True)
    dout = torch.randn_like(out)
    leaves = (q, k, v) + ((sinks,) if with_sinks else ())
    grads = torch.autograd.grad((out.float() * dout.float()).sum(), leaves)
    exact_leaves = [t.detach().double().requires_grad_() for t in leaves]
    exact_out, exact_lse = ref.reference_varlen(*exact_leaves[:3], cu(lengths_q), cu(lengths_k), None, causal,
                                                window=window, softcap=softcap,
                                                sinks=exact_leaves[3] if with_sinks else None)
    exact = torch.autograd.grad((exact_out * dout.double()).sum(), exact_leaves)
    assert max_error(out, exact_out) < 2e-2
    assert max_error(finite(lse), finite(exact_lse)) < 1e-2
    for name, g, e in zip(["dq", "dk", "dv", "dsinks"], grads, exact):
        assert max_error(g, e) <= 3e-2 * (1 + e.abs().max().item()), name


@gpu
@pytest.mark.parametrize("with_sinks", [False, True])
def test_windowed_causal_backward_reruns_bitwise_equal(with_sinks):
    q, k, v = gpu_inputs(2, 1000, 1000, 8, 2, 128, seed=11)
    sinks = sink_logits(8, "cuda") if with_sinks else None
    dout = torch.randn(q.shape, device="cuda", dtype=q.dtype)
    leaves = (q, k, v) + ((sinks,) if with_sinks else ())

    def step():
        out = dash_attn.flash_attn_func(q, k, v, causal=True, window_size=(256, 0), softcap=30.0,
                                        learnable_sink=sinks)
        return (out,) + torch.autograd.grad(out, leaves, dout)

    first = step()
    for run in range(20):
        for name, a, b in zip(["out", "dq", "dk", "dv", "dsinks"], first, step()):
            assert torch.equal(a, b), f"{name} differs on rerun {run}"


@gpu
def test_wave_schedules_with_a_window_are_refused_by_name():
    q, k, v = gpu_inputs(1, 256, 256, 4, 4, 128)
    for schedule in ("shift", "symmetric_shift"):
        with pytest.raises((ValueError, NotImplementedError), match="window"):  # the library's message, surfaced
            out = dash_attn.flash_attn_func(q, k, v, causal=True, window_size=(64, 0), schedule=schedule)
            out.float().sum().backward()


@gpu
def test_custom_ops_with_score_mods_pass_opcheck():
    q, k, v = (t.detach() for t in gpu_inputs(1, 128, 160, 4, 2, 64))
    sinks = torch.randn(4, device="cuda")
    torch.library.opcheck(ops.fwd, (q, k, v, 0.125, True, True, "auto", 0, 32, 0, 10.0, sinks))
    out, lse = ops.fwd(q, k, v, 0.125, True, True, "auto", 0, 32, 0, 10.0, sinks)
    torch.library.opcheck(ops.bwd, (torch.randn_like(out), None, q, k, v, out, lse, 0.125, True, True, "auto", 0, 32,
                                    0, 10.0, sinks, True))
