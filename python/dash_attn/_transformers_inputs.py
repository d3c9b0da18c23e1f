"""What the transformers attention function accepts, and how a padded or
packed batch becomes a variable-length one. transformers passes model options
through **kwargs (probed on Llama, Mistral, Gemma 2/3, GPT-OSS, Qwen2 with
transformers 5.17 and 5.24): each one either leaves the attention's result
unchanged, is honoured, or is refused here by name.

Honoured as flash_attn_varlen_func calls, the way transformers' own
flash-attention path makes them:
- a 2-D padding mask (batch, keys), as the registered flash_attention_mask
  gives it (None unless there is padding): the valid tokens are gathered
  (unpadded), attended per sequence, and scattered back (zeros at the pads).
  Left and right padding; with a cache the queries are the last q_len
  positions of each row, so a decoding step (1 query, the cache's keys) is
  bottom-right causal per sequence; keys past the mask (a StaticCache's unused
  tail) are left out.
- packed rows: position_ids that restart (a document starts wherever a
  position is not its predecessor + 1, and at every row's start: the rule of
  transformers.masking_utils.find_packed_sequence_indices), or the
  cu_seq_lens_q/k (and max_length_q/k) kwargs of DataCollatorWithFlattening;
  the batch is flattened and every document attends to itself only.

Model options honoured as flash_attn_func / flash_attn_varlen_func keywords:
- sliding_window (Mistral, Gemma 2/3, GPT-OSS, Qwen2): a key is visible iff
  q_pos - k_pos < sliding_window (masking_utils.sliding_window_overlay, what
  eager computes), i.e. window_size = (sliding_window - 1, 0) with the causal
  mask; passed only when a sequence has more keys than the window (as
  transformers' flash-attention path does). A bidirectional one is refused:
  there transformers' eager mask (|q - k| <= sliding_window) and its
  flash-attention path ((sliding_window - 1) each side) differ by a key.
- softcap (Gemma 2's attn_logit_softcapping): softcap=.
- s_aux (GPT-OSS's per-head sinks): learnable_sink=, differentiable.

The index arithmetic syncs with the device (as transformers' does); every
layer of a forward passes the same mask or position ids, so the layout is kept
for that tensor while it is unchanged."""

import weakref
from typing import NamedTuple, Optional

# Keyword arguments that do not change what attention computes.
NEUTRAL_KWARGS = frozenset({
    "use_cache", "cache_position", "past_key_values", "past_key_value", "output_hidden_states",
    "output_router_logits", "num_items_in_batch", "return_dict",
})
# Handled below: honoured, or refused unless their value leaves the result unchanged.
CHECKED_KWARGS = frozenset({"sliding_window", "softcap", "s_aux", "output_attentions", "cu_seq_lens_q",
                            "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx", "position_ids"})

_PREFIX = "dash_attn (attn_implementation='dash_attn'): not supported yet: "


class VarlenLayout(NamedTuple):
    """A transformers batch as flash_attn_varlen_func's arguments.
    indices_q / indices_k: the rows of the flattened (batch * seqlen) queries /
    keys that the packed tensors take, in order; None: all of them. keys: how
    many key positions of each row are used (a StaticCache's tail is not)."""
    cu_seqlens_q: object
    cu_seqlens_k: object
    max_seqlen_q: int
    max_seqlen_k: int
    indices_q: object = None
    indices_k: object = None
    keys: Optional[int] = None

    def pack(self, q, k, v):
        """(batch, seqlen, heads, head_dim) -> (total, heads, head_dim)."""
        if self.keys is not None:
            k, v = k[:, :self.keys], v[:, :self.keys]
        return _rows(q, self.indices_q), _rows(k, self.indices_k), _rows(v, self.indices_k)

    def unpack(self, out, batch, seqlen):
        """(total_q, heads, head_dim) -> (batch, seqlen, heads, head_dim), zeros at the pads."""
        if self.indices_q is not None:
            out = out.new_zeros((batch * seqlen,) + tuple(out.shape[1:])).index_copy(0, self.indices_q, out)
        return out.reshape((batch, seqlen) + tuple(out.shape[1:]))


def _rows(t, indices):
    flat = t.reshape((-1,) + tuple(t.shape[2:]))
    return flat if indices is None else flat.index_select(0, indices)


def check_transformers_inputs(query, key, attention_mask, dropout, kwargs, causal=True):
    """Raises NotImplementedError naming every input dash_attn cannot honour;
    returns (layout, features): the VarlenLayout of a padded or packed batch
    (None for a plain one) and the keywords (window_size, softcap,
    learnable_sink) flash_attn_func / flash_attn_varlen_func get for the
    model's options. query/key are in transformers' (batch, heads, seqlen,
    head_dim) layout."""
    refused = []
    features = {}
    if dropout:
        refused.append(f"dropout={dropout} (attention dropout)")
    softcap = kwargs.get("softcap")
    if softcap:
        features["softcap"] = softcap
    if kwargs.get("s_aux") is not None:
        features["learnable_sink"] = kwargs["s_aux"]
    if kwargs.get("output_attentions"):
        refused.append("output_attentions=True (dash_attn returns no attention weights)")
    unknown = sorted(set(kwargs) - NEUTRAL_KWARGS - CHECKED_KWARGS)
    if unknown:
        refused.append(f"unknown keyword arguments {unknown}")
    batch, queries, keys = query.shape[0], query.shape[2], key.shape[2]
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if attention_mask is not None:
        shape = tuple(attention_mask.shape)
        if len(shape) != 2 or shape[0] != batch:
            refused.append(f"attention_mask of shape {shape} (dash_attn takes a 2-D padding mask (batch={batch}, "
                           "keys), as transformers' flash-attention mask gives it)")
        elif shape[1] < queries:
            refused.append(f"attention_mask of shape {shape} with {queries} queries (a mask shorter than the queries)")
        if cu_q is not None or cu_k is not None:
            refused.append("cu_seq_lens_q/k together with attention_mask (packed sequences with padding)")
    elif (cu_q is None) != (cu_k is None):
        given, missing = ("cu_seq_lens_q", "cu_seq_lens_k") if cu_k is None else ("cu_seq_lens_k", "cu_seq_lens_q")
        refused.append(f"{given} without {missing} (packed sequences need both)")
    elif cu_q is not None and (len(cu_q.shape) != 1 or len(cu_k.shape) != 1):
        refused.append(f"cu_seq_lens_q/k of shapes {tuple(cu_q.shape)} and {tuple(cu_k.shape)} (expected 1-D "
                       "offsets, batch + 1 entries)")
    if refused:
        raise NotImplementedError(_PREFIX + "; ".join(refused))

    layout = None
    if attention_mask is not None:
        layout = padding_layout(attention_mask, queries, keys)
    elif cu_q is not None:
        layout = given_layout(cu_q, cu_k, kwargs.get("max_length_q"), kwargs.get("max_length_k"), query.device)
    else:
        layout = packed_layout(kwargs.get("position_ids"), batch, queries)
        if layout is not None and keys != queries:
            refused.append(f"position_ids that restart within a row with {keys} keys for {queries} queries "
                           "(packed sequences with a cache)")
    if kwargs.get("seq_idx") is not None and (attention_mask is not None or layout is None):
        refused.append("seq_idx without packed sequences (give cu_seq_lens_q/k or position_ids that restart)")
    window = kwargs.get("sliding_window")
    longest = layout.max_seqlen_k if layout is not None else keys
    # transformers applies a window only when it can hide a key: a sequence of more keys than the window.
    if window is not None and longest > window:
        where = "keys" if layout is None else "keys in the longest sequence"
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            refused.append(f"sliding_window={window!r} (expected a positive int)")
        elif not causal:
            refused.append(f"sliding_window={window} with is_causal=False and {longest} {where} (bidirectional "
                           "sliding windows: transformers' eager and flash-attention masks differ there)")
        else:
            features["window_size"] = (window - 1, 0)  # q_pos - k_pos <= window - 1: eager's rule
    if refused:
        raise NotImplementedError(_PREFIX + "; ".join(refused))
    return layout, features


_last_layout = (None, None, None, None)  # (weak reference to the source tensor, its _version, key, layout)


def _kept(source, key, compute):
    """compute(), kept for `source` (a mask or position ids tensor) while it is
    unchanged: one layout, for the tensor every layer of a forward passes.
    Not kept while torch.compile traces (its tensors are not real)."""
    global _last_layout
    import torch

    if torch.compiler.is_compiling():
        return compute()
    reference, version, last_key, layout = _last_layout
    if reference is not None and reference() is source and version == source._version and last_key == key:
        return layout
    layout = compute()
    _last_layout = (weakref.ref(source), source._version, key, layout)
    return layout


def _unpad(mask):
    """(indices, cu_seqlens, max_seqlen) of a (batch, seqlen) mask's valid tokens."""
    import torch

    lengths = mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
    # A positive bound even when every row is padding (flash_attn_varlen_func's rule).
    return indices, cu_seqlens, max(int(lengths.max()), 1)


def padding_layout(attention_mask, queries, keys):
    """The layout of a padded batch: attention_mask (batch, mask_len), 1 at
    valid tokens; queries and keys: the rows' query and key counts. The queries
    are each row's last `queries` positions (transformers' convention)."""
    return _kept(attention_mask, ("padding", queries, keys), lambda: _padding_layout(attention_mask, queries, keys))


def _padding_layout(attention_mask, queries, keys):
    import torch

    mask = attention_mask.bool()
    if mask.shape[1] > keys:  # a longer mask than keys: its last positions are the keys'
        mask = mask[:, -keys:]
    used_keys = mask.shape[1]
    indices_k, cu_seqlens_k, max_seqlen_k = _unpad(mask)
    if queries == used_keys:
        indices_q, cu_seqlens_q, max_seqlen_q = indices_k, cu_seqlens_k, max_seqlen_k
    elif queries == 1:  # a decoding step: one query per row, every row's
        batch = mask.shape[0]
        indices_q, cu_seqlens_q, max_seqlen_q = None, torch.arange(batch + 1, dtype=torch.int32,
                                                                   device=mask.device), 1
    else:
        indices_q, cu_seqlens_q, max_seqlen_q = _unpad(mask[:, -queries:])
    return VarlenLayout(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, indices_q, indices_k,
                        used_keys if used_keys < keys else None)


def packed_layout(position_ids, batch, seqlen):
    """The layout of rows packed with documents, from (batch or 1, seqlen)
    position ids; None when no row restarts (or position_ids is None or not of
    that shape)."""
    if position_ids is None or len(position_ids.shape) != 2 or position_ids.shape[1] != seqlen or seqlen < 2:
        return None
    if position_ids.shape[0] not in (1, batch):
        return None
    return _kept(position_ids, ("packed", batch), lambda: _packed_layout(position_ids, batch))


def _packed_layout(position_ids, batch):
    import torch

    positions = position_ids.expand(batch, -1)
    starts = torch.ones(positions.shape, dtype=torch.bool, device=positions.device)
    starts[:, 1:] = positions[:, 1:] - positions[:, :-1] != 1
    if not bool(starts[:, 1:].any()):
        return None
    first = torch.nonzero(starts.flatten(), as_tuple=False).flatten().to(torch.int32)
    total = torch.tensor([starts.numel()], dtype=torch.int32, device=first.device)
    cu_seqlens = torch.cat([first, total])
    max_seqlen = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    return VarlenLayout(cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)


def given_layout(cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, device):
    """The layout of DataCollatorWithFlattening's kwargs: the offsets of the
    flattened queries and keys (any int dtype, moved to int32 on the queries'
    device); a max_length not given is read from them."""
    import torch

    cu_q, cu_k = (t.to(device=device, dtype=torch.int32) for t in (cu_seq_lens_q, cu_seq_lens_k))
    lengths = []
    for cu, given in ((cu_q, max_length_q), (cu_k, max_length_k)):
        if given is None:
            given = (cu[1:] - cu[:-1]).max() if cu.shape[0] > 1 else 1
        lengths.append(max(int(given), 1))
    return VarlenLayout(cu_q, cu_k, *lengths)


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
