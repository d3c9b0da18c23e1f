"""Registration with Hugging Face transformers' attention-function registry:
AutoModel.from_config(config, attn_implementation="dash_attn")."""

import importlib.util


def transformers_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention-function contract: query/key/value are (batch,
    heads, seqlen, head_dim); returns (batch, seqlen, heads, head_dim) and no weights.
    The mask is module.is_causal; the registered mask function gives None
    unless there is padding, which is refused."""
    from .interface import flash_attn_func

    if dropout:
        raise NotImplementedError("dash_attn: attention dropout is not supported")
    if attention_mask is not None:
        raise NotImplementedError("dash_attn: padding masks are not supported yet (varlen is planned)")
    causal = bool(getattr(module, "is_causal", True)) and query.shape[2] > 1
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    return flash_attn_func(q, k, v, softmax_scale=scaling, causal=causal), None


def register_transformers():
    """Registers 'dash_attn' if transformers is installed; returns whether it did."""
    if importlib.util.find_spec("transformers") is None:
        return False
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import flash_attention_mask

    AttentionInterface.register("dash_attn", transformers_attention)
    # FlashAttention's mask convention: None unless the batch has padding.
    AttentionMaskInterface.register("dash_attn", flash_attention_mask)
    return True
