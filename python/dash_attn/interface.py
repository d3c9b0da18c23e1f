"""User-facing functions: FlashAttention's flash_attn_func and PyTorch's
scaled_dot_product_attention, with dash_attn's deterministic backward."""

import math

import torch

from . import ops
from ._checks import check_qkv, check_unsupported, resolve_deterministic

# FlashAttention-3 keywords and the value that means "not used".
_FA3_DEFAULTS = {"qv": None, "q_descale": None, "k_descale": None, "v_descale": None, "attention_chunk": 0,
                 "num_splits": 1, "pack_gqa": None, "sm_margin": 0}


def _is_default(name, value):
    default = _FA3_DEFAULTS[name]
    # Identity for None: comparing a tensor with None is not a boolean.
    return value is None if default is None else value == default


def _attention(function, q, k, v, softmax_scale, causal, deterministic, schedule):
    check_qkv(function, q, k, v)
    deterministic, schedule = resolve_deterministic(function, deterministic, schedule,
                                                    torch.are_deterministic_algorithms_enabled())
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return ops.fwd(q, k, v, float(scale), bool(causal), bool(deterministic), schedule)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=True, return_attn_probs=False, *, schedule="auto", **kwargs):
    """Drop-in for flash_attn.flash_attn_func (and FA3's flash_attn_interface):
    q (batch, seqlen_q, heads_q, head_dim), k and v (batch, seqlen_k, heads_kv,
    head_dim), bf16 or fp16 on an sm_90 GPU. Differences: deterministic
    defaults to True, and schedule= picks the deterministic backward schedule
    ('auto', 'fa3', 'descending', 'shift', 'symmetric_shift'; 'atomic' with
    deterministic=False). Returns out, or (out, softmax_lse, None) with
    return_attn_probs=True."""
    unknown = set(kwargs) - set(_FA3_DEFAULTS)
    if unknown:
        raise TypeError(f"dash_attn.flash_attn_func: unexpected keyword arguments {sorted(unknown)}")
    check_unsupported("flash_attn_func", dropout_p=dropout_p, window_size=window_size, softcap=softcap,
                      alibi_slopes=alibi_slopes,
                      **{name: value for name, value in kwargs.items() if not _is_default(name, value)})
    out, lse = _attention("flash_attn_func", q, k, v, softmax_scale, causal, deterministic, schedule)
    return (out, lse, None) if return_attn_probs else out


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, deterministic=True, schedule="auto"):
    """torch.nn.functional.scaled_dot_product_attention's signature and layout
    (batch, heads, seqlen, head_dim). Causal masks are bottom-right aligned when
    seqlen_q != seqlen_k (FlashAttention's convention; SDPA's is_causal is
    top-left aligned there), so is_causal with seqlen_q != seqlen_k is refused."""
    if attn_mask is not None:
        raise NotImplementedError("dash_attn.scaled_dot_product_attention: attn_mask is not supported yet; "
                                  "use is_causal=True for causal masks")
    check_unsupported("scaled_dot_product_attention", dropout_p=dropout_p)
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError("dash_attn.scaled_dot_product_attention: is_causal with seqlen_q != seqlen_k: SDPA aligns "
                         "the mask top-left, dash_attn bottom-right; use flash_attn_func(causal=True) for the latter")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise ValueError("dash_attn.scaled_dot_product_attention: argument 'key': query has "
                         f"{query.shape[1]} heads and key {key.shape[1]}; pass enable_gqa=True for GQA/MQA")
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    out, _ = _attention("scaled_dot_product_attention", q, k, v, scale, is_causal, deterministic, schedule)
    return out.transpose(1, 2)
