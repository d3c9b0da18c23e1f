"""Hugging Face transformers: attn_implementation="dash_attn".

Registration is lazy: importing dash_attn imports no transformers (4.6-5.8 s
measured on 2026-12-01). It happens when transformers' modeling_utils is
imported (every model class imports it), or at once if it already was, or
when register_transformers() is called. Padded batches (a 2-D attention
mask, batched generate with left padding included) and packed ones
(position_ids that restart, DataCollatorWithFlattening's cu_seq_lens_q/k) run
through flash_attn_varlen_func, differentiable and deterministic; sliding
windows, softcap and attention sinks (s_aux) are honoured. The attention
function refuses, by name, every input whose meaning the kernels
cannot honour yet instead of dropping it (transformers passes model options
through **kwargs): _transformers_inputs.py."""

import importlib.abc
import importlib.util
import sys
import warnings

from ._transformers_inputs import check_transformers_inputs, target_dtype

# The module whose import means "a model is about to be built".
_TRIGGER = "transformers.modeling_utils"


def transformers_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, is_causal=None,
                           **kwargs):
    """transformers' attention-function contract: query/key/value are (batch,
    heads, seqlen, head_dim); returns (batch, seqlen, heads, head_dim) and no
    weights. The registered mask function gives None unless there is padding;
    a padded or packed batch runs as a variable-length one (causal masks
    bottom-right aligned per sequence, as transformers' flash-attention path)."""
    from .interface import flash_attn_func, flash_attn_varlen_func

    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    layout, features = check_transformers_inputs(query, key, attention_mask, dropout, kwargs, causal)
    dtype = target_dtype(query, module)
    q, k, v = (t.transpose(1, 2) if dtype is None else t.transpose(1, 2).to(dtype) for t in (query, key, value))
    if layout is None:
        return flash_attn_func(q, k, v, softmax_scale=scaling, causal=causal, **features), None
    out = flash_attn_varlen_func(*layout.pack(q, k, v), layout.cu_seqlens_q, layout.cu_seqlens_k, layout.max_seqlen_q,
                                 layout.max_seqlen_k, softmax_scale=scaling, causal=causal, **features)
    return layout.unpack(out, q.shape[0], q.shape[1]), None


def register_transformers():
    """Registers 'dash_attn' with transformers' attention and mask registries.
    Raises ImportError with a clear message when transformers is missing or has
    no registry (before 4.53)."""
    if importlib.util.find_spec("transformers") is None:
        raise ImportError("dash_attn.register_transformers: transformers is not installed")
    import transformers

    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    except ImportError as error:
        raise ImportError(f"dash_attn.register_transformers: transformers {transformers.__version__} has no "
                          "attention registry (AttentionInterface and AttentionMaskInterface arrived in 4.53); "
                          "upgrade transformers to use attn_implementation='dash_attn'") from error
    AttentionInterface.register("dash_attn", transformers_attention)
    # FlashAttention's mask convention: None unless the batch has padding.
    AttentionMaskInterface.register("dash_attn", flash_attention_mask)


def _register_tolerantly():
    try:
        register_transformers()
    except ImportError as error:
        warnings.warn(f"{error}; attn_implementation='dash_attn' is not available", stacklevel=2)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds _TRIGGER through the other finders and registers once its module
    has executed. One shot: it leaves sys.meta_path on its first use."""

    def find_spec(self, name, path=None, target=None):
        if name != _TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _register_tolerantly()

        spec.loader.exec_module = exec_module
        return spec


def register_transformers_lazily():
    """Registers now if transformers' models are already imported, otherwise
    as soon as they are; never imports transformers itself."""
    if _TRIGGER in sys.modules:
        _register_tolerantly()
    elif not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
