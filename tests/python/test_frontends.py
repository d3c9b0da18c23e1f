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

    def fwd(q, k, v, softmax_scale, causal, deterministic, schedule, sm_margin):
        recorded.append(dict(shapes=(q.shape, k.shape, v.shape), scale=softmax_scale, causal=causal,
                             deterministic=deterministic, schedule=schedule, sm_margin=sm_margin))
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
    with pytest.raises(NotImplementedError, match=r"window_size=\(128, 0\)"):
        flash_attn_interface.flash_attn_func(*qkv(), window_size=(128, 0))
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
