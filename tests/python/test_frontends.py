"""The Python frontends' argument mapping, on the CPU with the kernels stood
in for: FA2's order (dash_attn.flash_attn_func and its packed forms), FA3's
(dash_attn.flash_attn_interface), FA4's return_lse, hints and sm_margin.
Skipped without torch."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import dash_attn  # noqa: E402
from dash_attn import flash_attn_interface, interface, ops  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    """ops.fwd stood in for (no GPU here): records what the frontends send."""
    recorded = []

    def fwd(q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin, window_left, window_right, softcap,
            sinks):
        recorded.append(dict(shapes=(q.shape, k.shape, v.shape), scale=softmax_scale, causal=causal,
                             deterministic=deterministic, schedule=schedule, sm_margin=sm_margin,
                             window=(window_left, window_right), softcap=softcap, sinks=sinks))
        return torch.zeros_like(q), torch.zeros(q.shape[0], q.shape[2], q.shape[1])

    monkeypatch.setattr(ops, "fwd", fwd)
    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)  # CPU tensors
    return recorded


def qkv(heads_q=4, heads_kv=2):
    return (torch.randn(1, 16, heads_q, 64), torch.randn(1, 16, heads_kv, 64), torch.randn(1, 16, heads_kv, 64))


def test_fa3_order_takes_softmax_scale_fourth_and_returns_lse_with_probs(calls):
    out, lse = flash_attn_interface.flash_attn_func(*qkv(), 0.3, True, return_attn_probs=True)
    assert calls[-1]["scale"] == pytest.approx(0.3) and calls[-1]["causal"] is True
    assert lse.shape == (1, 4, 16)
    assert isinstance(flash_attn_interface.flash_attn_func(*qkv(), 0.3), torch.Tensor)


def test_fa2_order_names_dropout_and_points_at_fa3_order(calls):
    with pytest.raises(NotImplementedError, match=r"dropout_p=0.3 .*flash_attn_interface.flash_attn_func"):
        dash_attn.flash_attn_func(*qkv(), 0.3)
    assert not calls


def test_return_values(calls):
    assert isinstance(dash_attn.flash_attn_func(*qkv()), torch.Tensor)
    out, lse, probs = dash_attn.flash_attn_func(*qkv(), return_attn_probs=True)
    assert probs is None and lse.shape == (1, 4, 16)
    out, lse = dash_attn.flash_attn_func(*qkv(), return_lse=True)  # FA4's keyword
    assert out.shape == (1, 16, 4, 64)


def test_hints_are_accepted_and_sm_margin_is_passed(calls):
    dash_attn.flash_attn_func(*qkv(), pack_gqa=True, num_splits=4, sm_margin=8)
    flash_attn_interface.flash_attn_func(*qkv(), pack_gqa=False, num_splits=2, sm_margin=3)
    assert [c["sm_margin"] for c in calls] == [8, 3]
    with pytest.raises(ValueError, match="'sm_margin': expected an int >= 0"):
        dash_attn.flash_attn_func(*qkv(), sm_margin=-1)


def test_features_dash_attn_lacks_are_named(calls):
    with pytest.raises(NotImplementedError, match=r"alibi_slopes=<tensor of shape \(4,\)>"):
        dash_attn.flash_attn_func(*qkv(), alibi_slopes=torch.ones(4))
    with pytest.raises(NotImplementedError, match=r"attention_chunk=64"):
        flash_attn_interface.flash_attn_func(*qkv(), attention_chunk=64)
    with pytest.raises(NotImplementedError, match=r"q_descale=<tensor of shape \(1, 2\)>"):
        flash_attn_interface.flash_attn_func(*qkv(), q_descale=torch.ones(1, 2))
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['fancy'\\]"):
        dash_attn.flash_attn_func(*qkv(), fancy=1)
    assert not calls


def test_packed_forms_split_into_q_k_v(calls):
    dash_attn.flash_attn_qkvpacked_func(torch.randn(1, 16, 3, 4, 64), causal=True)
    dash_attn.flash_attn_kvpacked_func(torch.randn(1, 16, 4, 64), torch.randn(1, 20, 2, 2, 64))
    flash_attn_interface.flash_attn_qkvpacked_func(torch.randn(1, 16, 3, 4, 64))
    flash_attn_interface.flash_attn_qkvpacked_func(torch.randn(1, 16, 8 + 2 * 2, 64), num_heads_q=8)
    shapes = [c["shapes"] for c in calls]
    assert shapes[0] == ((1, 16, 4, 64),) * 3
    assert shapes[1] == ((1, 16, 4, 64), (1, 20, 2, 64), (1, 20, 2, 64))
    assert shapes[3] == ((1, 16, 8, 64), (1, 16, 2, 64), (1, 16, 2, 64))
    with pytest.raises(ValueError, match="'num_heads_q'"):
        flash_attn_interface.flash_attn_qkvpacked_func(torch.randn(1, 16, 9, 64), num_heads_q=4)


def test_window_softcap_and_sinks_reach_the_op_in_every_order(calls):
    """FA2's order (window_size 7th, softcap 8th), FA3's (window_size 9th,
    softcap 11th), FA4's keywords (window_size with None, learnable_sink)."""
    sinks = torch.randn(4)
    dash_attn.flash_attn_func(*qkv(), 0.0, None, True, (64, 0), 30.0)
    assert (calls[-1]["window"], calls[-1]["softcap"], calls[-1]["sinks"]) == ((64, 0), 30.0, None)
    flash_attn_interface.flash_attn_func(*qkv(), None, False, None, None, None, None, (8, 8), 0, 5.0)
    assert (calls[-1]["window"], calls[-1]["softcap"]) == ((8, 8), 5.0)
    dash_attn.flash_attn_func(*qkv(), causal=True, window_size=(None, None), learnable_sink=sinks)
    assert calls[-1]["window"] == (-1, -1) and torch.equal(calls[-1]["sinks"], sinks)
    flash_attn_interface.flash_attn_func(*qkv(), learnable_sink=sinks.bfloat16())
    assert calls[-1]["sinks"].dtype == torch.float32  # FA4 takes bf16 sinks: converted
    dash_attn.flash_attn_qkvpacked_func(torch.randn(1, 16, 3, 4, 64), window_size=(3, 2), learnable_sink=sinks)
    assert calls[-1]["window"] == (3, 2) and calls[-1]["sinks"] is not None
    dash_attn.flash_attn_func(*qkv())
    assert (calls[-1]["window"], calls[-1]["softcap"], calls[-1]["sinks"]) == ((-1, -1), 0.0, None)


def test_sinks_take_their_gradient_through_the_conversion(calls):
    sinks = torch.randn(4, dtype=torch.bfloat16, requires_grad=True)
    dash_attn.flash_attn_func(*qkv(), learnable_sink=sinks)
    sent = calls[-1]["sinks"]
    assert sent.dtype == torch.float32 and sent.requires_grad
    sent.sum().backward()
    assert sinks.grad is not None and sinks.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(window_size=(1, 2, 3)), ValueError, "'window_size': expected (left, right)"),
    (dict(window_size=(0.5, 0)), ValueError, "left = 0.5"),
    (dict(window_size=(4, True)), ValueError, "right = True"),
    (dict(softcap=float("inf")), ValueError, "'softcap': expected a finite number >= 0"),
    (dict(softcap="30"), ValueError, "'softcap'"),
    (dict(learnable_sink=torch.zeros(1, 4)), ValueError, "'learnable_sink': expected shape (4,)"),
    (dict(learnable_sink=torch.zeros(4, dtype=torch.float64)), TypeError, "expected dtype torch.float32"),
    (dict(learnable_sink=[0.0] * 4), TypeError, "'learnable_sink': expected a torch.Tensor"),
])
def test_bad_window_softcap_and_sinks_are_named(calls, keywords, error, fragment):
    with pytest.raises(error) as raised:
        dash_attn.flash_attn_func(*qkv(), **keywords)
    assert fragment in str(raised.value) and "dash_attn.flash_attn_func" in str(raised.value)
    assert not calls
