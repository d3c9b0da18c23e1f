"""FlashAttention-3's Python interface (hopper/flash_attn_interface.py): the
same names, argument order and returns, so that

    from dash_attn.flash_attn_interface import flash_attn_func

replaces FA3's import. softmax_scale is the 4th positional argument; with
return_attn_probs=True the functions return (out, softmax_lse). Differences:
deterministic defaults to True (and schedule= picks the deterministic
schedule), lse carries a gradient, window_size and softcap are honoured,
learnable_sink= (keyword only, FA4's name) takes per-head attention sinks, and
FA3 features dash_attn lacks (FP8 descales, qv, attention_chunk) raise
NotImplementedError by name.
flash_attn_varlen_func has the same backward (deterministic, lse gradient);
its schedules are 'auto', 'fa3', 'descending' ('atomic' non-deterministic)."""

from .interface import attention, varlen_attention


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=True, sm_margin=0, return_attn_probs=False, *, schedule="auto",
                    learnable_sink=None):
    out, lse = attention("flash_attn_interface.flash_attn_func", q, k, v, softmax_scale, causal, deterministic,
                         schedule, sm_margin, window_size=window_size, softcap=softcap,
                         learnable_sink=learnable_sink, qv=qv, q_descale=q_descale, k_descale=k_descale,
                         v_descale=v_descale, attention_chunk=attention_chunk, num_splits=num_splits,
                         pack_gqa=pack_gqa)
    return (out, lse) if return_attn_probs else out


def flash_attn_qkvpacked_func(qkv, softmax_scale=None, causal=False, q_descale=None, k_descale=None, v_descale=None,
                              window_size=(-1, -1), attention_chunk=0, softcap=0.0, deterministic=True,
                              num_heads_q=None, sm_margin=0, return_attn_probs=False, *, schedule="auto",
                              learnable_sink=None):
    """qkv (batch, seqlen, 3, heads, head_dim), or (batch, seqlen, heads_q +
    2 * heads_kv, head_dim) with num_heads_q for GQA/MQA, as FA3 takes it."""
    if qkv.dim() == 5:
        q, k, v = qkv.unbind(dim=2)
    else:
        if num_heads_q is None:
            raise ValueError("dash_attn.flash_attn_interface.flash_attn_qkvpacked_func: argument 'num_heads_q': "
                             "required when qkv has 4 dimensions (batch, seqlen, heads_q + 2 * heads_kv, head_dim)")
        heads_kv, remainder = divmod(qkv.shape[2] - num_heads_q, 2)
        if heads_kv < 1 or remainder:
            raise ValueError("dash_attn.flash_attn_interface.flash_attn_qkvpacked_func: argument 'num_heads_q': "
                             f"{num_heads_q} leaves no even split of the {qkv.shape[2]} packed heads into k and v")
        q, k, v = qkv.split([num_heads_q, heads_kv, heads_kv], dim=2)
    out, lse = attention("flash_attn_interface.flash_attn_qkvpacked_func", q, k, v, softmax_scale, causal,
                         deterministic, schedule, sm_margin, window_size=window_size, softcap=softcap,
                         learnable_sink=learnable_sink, q_descale=q_descale, k_descale=k_descale,
                         v_descale=v_descale, attention_chunk=attention_chunk)
    return (out, lse) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=True, sm_margin=0, return_attn_probs=False, *,
                           schedule="auto", learnable_sink=None):
    """q (total_q, heads_q, head_dim), k and v (total_k, heads_kv, head_dim)
    packed, as FA3 takes them; lse (heads_q, total_q)."""
    out, lse = varlen_attention("flash_attn_interface.flash_attn_varlen_func", q, k, v, cu_seqlens_q, cu_seqlens_k,
                                seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                                deterministic, schedule, sm_margin, window_size=window_size, softcap=softcap,
                                learnable_sink=learnable_sink, qv=qv, q_descale=q_descale, k_descale=k_descale,
                                v_descale=v_descale, attention_chunk=attention_chunk, num_splits=num_splits,
                                pack_gqa=pack_gqa)
    return (out, lse) if return_attn_probs else out
