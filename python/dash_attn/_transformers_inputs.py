"""What the transformers attention function accepts. transformers passes model
options through **kwargs (probed on Llama, Mistral, Gemma 2/3, GPT-OSS,
Qwen2 with transformers 5.17): each one either leaves the attention's result
unchanged, is honoured, or is refused here by name. Duck-typed on tensors
(.shape, .dtype, ._version, slicing), so the rules are tested without a GPU."""

import weakref

# Keyword arguments that do not change what attention computes.
NEUTRAL_KWARGS = frozenset({
    "use_cache", "cache_position", "past_key_values", "past_key_value", "output_hidden_states",
    "output_router_logits", "num_items_in_batch", "return_dict", "max_length_q", "max_length_k",
})
# Handled below: refused unless their value leaves the result unchanged.
CHECKED_KWARGS = frozenset({"sliding_window", "softcap", "s_aux", "output_attentions", "cu_seq_lens_q",
                            "cu_seq_lens_k", "seq_idx", "position_ids"})


def check_transformers_inputs(query, key, attention_mask, dropout, kwargs):
    """Raises NotImplementedError naming every input dash_attn cannot honour.
    query/key are in transformers' (batch, heads, seqlen, head_dim) layout."""
    refused = []
    if dropout:
        refused.append(f"dropout={dropout} (attention dropout)")
    if attention_mask is not None:
        refused.append("attention_mask (a padded batch needs variable-length attention)")
    window = kwargs.get("sliding_window")
    keys = key.shape[2]
    # transformers applies a window only when it can hide a key: keys > window.
    if window is not None and keys > window:
        refused.append(f"sliding_window={window} with {keys} keys (sliding-window attention)")
    softcap = kwargs.get("softcap")
    if softcap:
        refused.append(f"softcap={softcap} (logit soft-capping)")
    if kwargs.get("s_aux") is not None:
        refused.append("s_aux (attention sinks)")
    if kwargs.get("output_attentions"):
        refused.append("output_attentions=True (dash_attn returns no attention weights)")
    for name in ("cu_seq_lens_q", "cu_seq_lens_k", "seq_idx"):
        if kwargs.get(name) is not None:
            refused.append(f"{name} (packed sequences need variable-length attention)")
    if is_packed(kwargs.get("position_ids")):
        refused.append("position_ids that restart within a row (packed sequences need variable-length attention)")
    unknown = sorted(set(kwargs) - NEUTRAL_KWARGS - CHECKED_KWARGS)
    if unknown:
        refused.append(f"unknown keyword arguments {unknown}")
    if refused:
        raise NotImplementedError("dash_attn (attn_implementation='dash_attn'): not supported yet: " +
                                  "; ".join(refused))


_last_verdict = (None, None, False)  # (weak reference to position_ids, its _version, packed)


def is_packed(position_ids):
    """True when a row of (batch, seqlen) position ids is not one run of
    consecutive positions, i.e. holds several documents. The check syncs with
    the device once per position_ids tensor: every layer of a forward passes
    the same one, so the verdict is kept for it while it is unchanged."""
    global _last_verdict
    if position_ids is None or len(position_ids.shape) != 2 or position_ids.shape[1] < 2:
        return False
    reference, version, packed = _last_verdict
    if reference is not None and reference() is position_ids and version == position_ids._version:
        return packed
    packed = bool((position_ids[:, 1:] - position_ids[:, :-1] != 1).any())
    _last_verdict = (weakref.ref(position_ids), position_ids._version, packed)
    return packed


def target_dtype(query, module):
    """The dtype to cast float32 inputs to, as transformers' own flash-attention
    integration does (PEFT keeps norms in float32, which turns the attention's
    inputs float32): autocast's dtype, a quantized model's dtype, else the
    module's first Linear weight dtype. None for half-precision inputs."""
    import torch

    if query.dtype != torch.float32:
        return None
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    config = getattr(module, "config", None)
    if config is not None and hasattr(config, "_is_quantized"):
        return config.dtype
    linear = next((layer for layer in module.modules() if isinstance(layer, torch.nn.Linear)), None)
    dtype = linear.weight.dtype if linear is not None else torch.float32
    if dtype == torch.float32:
        raise TypeError("dash_attn (attn_implementation='dash_attn'): the model runs in float32; load it in "
                        "bfloat16 or float16 (dtype=torch.bfloat16) or run it under torch.autocast")
    return dtype
