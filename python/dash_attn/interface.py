"""User-facing functions in FlashAttention-2's argument order (flash_attn_func,
its qkv/kv-packed forms, flash_attn_varlen_func) and PyTorch's
scaled_dot_product_attention, with dash_attn's deterministic backward (for
variable-length batches too). FA3's order lives in flash_attn_interface."""

import math

import torch

from . import _library, ops
from ._checks import (HINTS, check_qkv, check_sinks, check_sm_margin, check_softcap, check_unsupported,
                      check_varlen_schedule, check_window, resolve_deterministic)

# FlashAttention-3 keywords flash_attn_func accepts beside FA2's, with their "off" value.
FA3_KEYWORDS = {"qv": None, "q_descale": None, "k_descale": None, "v_descale": None, "attention_chunk": 0,
                "num_splits": 1, "pack_gqa": None, "sm_margin": 0}


def attention(function, q, k, v, softmax_scale=None, causal=False, deterministic=True, schedule="auto", sm_margin=0,
              window_size=(-1, -1), softcap=0.0, learnable_sink=None, **features):
    """(out, lse) after every check; features are FlashAttention keywords that
    must hold their "off" value (check_unsupported) or are hints (HINTS).
    window_size, softcap and learnable_sink are honoured (check_window,
    check_softcap, check_sinks)."""
    check_unsupported(function, **{name: value for name, value in features.items() if name not in HINTS})
    check_qkv(function, q, k, v, _library.compiled_head_dims)
    check_sm_margin(function, sm_margin)
    options = _mask_options(function, q, window_size, softcap, learnable_sink, heads_dim=2)
    deterministic, schedule = resolve_deterministic(function, deterministic, schedule,
                                                    torch.are_deterministic_algorithms_enabled())
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return ops.forward(q, k, v, float(scale), bool(causal), bool(deterministic), schedule, sm_margin, *options)


def _mask_options(function, q, window_size, softcap, learnable_sink, heads_dim):
    """(window_left, window_right, softcap, sinks) as the ops take them: the
    sinks as float32 (a differentiable cast: their gradient reaches a bf16 or
    fp16 parameter), or None."""
    left, right = check_window(function, window_size)
    softcap = check_softcap(function, softcap)
    check_sinks(function, learnable_sink, q, heads_dim)
    sinks = learnable_sink.to(torch.float32) if learnable_sink is not None else None
    return left, right, softcap, sinks


def check_varlen(function, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k):
    """The packed layout's rules: q (total_q, heads_q, head_dim), k and v
    (total_k, heads_kv, head_dim), int32 lengths on q's device. The values in
    the lengths are not read: that would sync with the device (the kernels
    clamp every sequence into the tensors instead)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"dash_attn.{function}: argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(f"dash_attn.{function}: argument '{name}': expected 3 dimensions "
                             f"(total_tokens, heads, head_dim), got shape {tuple(t.shape)}")
        if 0 in t.shape:
            raise ValueError(f"dash_attn.{function}: argument '{name}': empty tensors are not accepted, "
                             f"got shape {tuple(t.shape)}")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"dash_attn.{function}: argument 'k': expected head_dim {q.shape[2]} like q, "
                         f"got shape {tuple(k.shape)}")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"dash_attn.{function}: argument 'v': expected the shape of k {tuple(k.shape)}, "
                         f"got {tuple(v.shape)}")
    # flash_attn_func's rules for device, dtype, compiled head dims and GQA, on
    # the packed tensors seen as one batch of total tokens (their shapes already pass).
    check_qkv(function, q[None], k[None], v[None], _library.compiled_head_dims)
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_int32_array(function, name, t, q.device)
    entries = cu_seqlens_q.shape[0]
    if entries < 2:
        raise ValueError(f"dash_attn.{function}: argument 'cu_seqlens_q': expected batch + 1 >= 2 entries, "
                         f"got {entries}")
    if cu_seqlens_k.shape[0] != entries:
        raise ValueError(f"dash_attn.{function}: argument 'cu_seqlens_k': expected {entries} entries like "
                         f"cu_seqlens_q (batch + 1), got {cu_seqlens_k.shape[0]}")
    for name, t in (("seqused_q", seqused_q), ("seqused_k", seqused_k)):
        if t is not None:
            _check_int32_array(function, name, t, q.device, entries - 1)
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        # SymInt: torch.compile may trace a changing length as a symbol.
        if not isinstance(value, (int, torch.SymInt)) or isinstance(value, bool):
            raise TypeError(f"dash_attn.{function}: argument '{name}': expected an int (the longest sequence's "
                            f"length), got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"dash_attn.{function}: argument '{name}': expected a positive int, got {value}")


def _check_int32_array(function, name, t, device, entries=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"dash_attn.{function}: argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise TypeError(f"dash_attn.{function}: argument '{name}': expected dtype torch.int32, got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"dash_attn.{function}: argument '{name}': expected 1 dimension, got shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"dash_attn.{function}: argument '{name}': expected device {device} like q, got {t.device}")
    if entries is not None and t.shape[0] != entries:
        raise ValueError(f"dash_attn.{function}: argument '{name}': expected {entries} entries (one per sequence), "
                         f"got {t.shape[0]}")


def varlen_attention(function, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale=None, causal=False, deterministic=True, schedule="auto", sm_margin=0,
                     window_size=(-1, -1), softcap=0.0, learnable_sink=None, **features):
    """attention() for a variable-length batch: (out, lse), lse (heads_q, total_q)."""
    check_unsupported(function, **{name: value for name, value in features.items() if name not in HINTS})
    check_varlen(function, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k)
    check_sm_margin(function, sm_margin)
    options = _mask_options(function, q, window_size, softcap, learnable_sink, heads_dim=1)
    check_varlen_schedule(function, schedule)
    deterministic, schedule = resolve_deterministic(function, deterministic, schedule,
                                                    torch.are_deterministic_algorithms_enabled())
    if not deterministic:
        schedule = "atomic"  # what 'auto' means without determinism, named for the varlen backward
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return ops.forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                              float(scale), bool(causal), bool(deterministic), schedule, sm_margin, *options)


def fa3_keywords(function, kwargs):
    if not kwargs:
        return kwargs
    unknown = set(kwargs) - set(FA3_KEYWORDS)
    if unknown:
        raise TypeError(f"dash_attn.{function}: unexpected keyword arguments {sorted(unknown)}")
    return kwargs


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=True, return_attn_probs=False, *, schedule="auto",
                    return_lse=False, learnable_sink=None, **kwargs):
    """Drop-in for flash_attn.flash_attn_func (FA2's order; FA3's keywords
    accepted): q (batch, seqlen_q, heads_q, head_dim), k and v (batch, seqlen_k,
    heads_kv, head_dim), bf16 or fp16 on an sm_90 GPU. Differences: deterministic
    defaults to True, and schedule= picks the deterministic backward schedule
    ('auto', 'fa3', 'descending', 'shift', 'symmetric_shift'; 'atomic' with
    deterministic=False). sm_margin= leaves SMs to other kernels; pack_gqa= and
    num_splits= are accepted hints. window_size=(left, right) is FlashAttention's
    sliding window (-1 or None: unbounded; bottom-right aligned; causal means
    right = 0), softcap > 0 caps the scores (softcap * tanh(s / softcap)),
    learnable_sink= (FA4's name) a (heads_q,) tensor of per-head sink logits
    (float32; bf16/fp16 are converted) that join every row's softmax
    denominator and get a gradient. Returns out; (out, lse, None) with
    return_attn_probs=True (FA2); (out, lse) with return_lse=True (FA4). lse
    carries a gradient."""
    out, lse = attention("flash_attn_func", q, k, v, softmax_scale, causal, deterministic, schedule,
                         window_size=window_size, softcap=softcap, learnable_sink=learnable_sink,
                         dropout_p=dropout_p, alibi_slopes=alibi_slopes, **fa3_keywords("flash_attn_func", kwargs))
    if return_lse:
        return out, lse
    return (out, lse, None) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=True, return_attn_probs=False, *, seqused_q=None, seqused_k=None,
                           schedule="auto", sm_margin=0, return_lse=False, learnable_sink=None, **fa3_kwargs):
    """Drop-in for flash_attn.flash_attn_varlen_func (FA2's order; FA3's
    keywords, seqused_q= and seqused_k= accepted): q (total_q, heads_q,
    head_dim), k and v (total_k, heads_kv, head_dim), the sequences packed
    along dim 0; cu_seqlens_q / cu_seqlens_k int32 (batch + 1) offsets on q's
    device; max_seqlen_* the longest lengths. Causal masks are bottom-right
    aligned per sequence. Differentiable in q, k, v (out's and lse's
    gradients); deterministic=True (the default) gives a backward whose bits
    per sequence do not depend on what else is packed; schedule= 'auto',
    'fa3', 'descending' ('atomic' with deterministic=False; the wave schedules
    'shift' and 'symmetric_shift' are fixed-length only). Rows outside every
    sequence's used length get zero gradients. window_size, softcap and
    learnable_sink as flash_attn_func's (the window bottom-right aligned per
    sequence; the sinks' gradient sums over every sequence). Returns out;
    (out, lse, None) with return_attn_probs=True; (out, lse) with
    return_lse=True; lse is (heads_q, total_q)."""
    if hasattr(dropout_p, "shape"):  # FA3's order takes seqused_q where FA2's takes dropout_p
        raise TypeError("dash_attn.flash_attn_varlen_func: argument 'dropout_p': got a tensor; for FA3's order "
                        "(seqused_q 8th) use dash_attn.flash_attn_interface.flash_attn_varlen_func or seqused_q=")
    out, lse = varlen_attention("flash_attn_varlen_func", q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
                                max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic, schedule, sm_margin,
                                window_size=window_size, softcap=softcap, learnable_sink=learnable_sink,
                                dropout_p=dropout_p, alibi_slopes=alibi_slopes,
                                **fa3_keywords("flash_attn_varlen_func", fa3_kwargs))
    if return_lse:
        return out, lse
    return (out, lse, None) if return_attn_probs else out


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=True, return_attn_probs=False, *,
                              schedule="auto", return_lse=False, **kwargs):
    """FA2's packed form: qkv (batch, seqlen, 3, heads, head_dim). The kernels
    read the three strided views in place; their gradients are stacked back."""
    q, k, v = qkv.unbind(dim=2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs, schedule=schedule, return_lse=return_lse, **kwargs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=True, return_attn_probs=False, *,
                             schedule="auto", return_lse=False, **kwargs):
    """FA2's packed form: q (batch, seqlen_q, heads_q, head_dim), kv (batch,
    seqlen_k, 2, heads_kv, head_dim)."""
    k, v = kv.unbind(dim=2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs, schedule=schedule, return_lse=return_lse, **kwargs)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, deterministic=True, schedule="auto"):
    """torch.nn.functional.scaled_dot_product_attention's signature and layout
    (batch, heads, seqlen, head_dim). Causal masks are bottom-right aligned when
    seqlen_q != seqlen_k (FlashAttention's convention; SDPA's is_causal is
    top-left aligned there), so is_causal with seqlen_q != seqlen_k is refused."""
    if attn_mask is not None:
        raise NotImplementedError("dash_attn.scaled_dot_product_attention: attn_mask is not supported yet; "
                                  "use is_causal=True for causal masks")
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError("dash_attn.scaled_dot_product_attention: is_causal with seqlen_q != seqlen_k: SDPA aligns "
                         "the mask top-left, dash_attn bottom-right; use flash_attn_func(causal=True) for the latter")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise ValueError("dash_attn.scaled_dot_product_attention: argument 'key': query has "
                         f"{query.shape[1]} heads and key {key.shape[1]}; pass enable_gqa=True for GQA/MQA")
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    out, _ = attention("scaled_dot_product_attention", q, k, v, scale, is_causal, deterministic, schedule,
                       dropout_p=dropout_p)
    return out.transpose(1, 2)
