"""Argument checks of the Python API. Pure Python on duck-typed tensors (only
.shape, .dtype, .device, .stride(), .data_ptr(), .is_contiguous() are used),
so the rules are tested in CI without torch or a GPU."""

SUPPORTED_DTYPES = ("torch.bfloat16", "torch.float16")
SCHEDULES = ("atomic", "fa3", "descending", "shift", "symmetric_shift", "auto")
# The variable-length backward's schedules ('auto' is 'descending'); the
# library refuses the wave schedules (shift, symmetric_shift) there.
VARLEN_SCHEDULES = ("atomic", "fa3", "descending", "auto")

# FlashAttention keyword arguments (FA2's and FA3's) with the value that means
# "feature off". Any other value asks for a feature dash_attn does not have yet.
# (window_size, softcap and learnable_sink are honoured: check_window,
# check_softcap, check_sinks.)
UNSUPPORTED_FEATURES = {
    "dropout_p": 0.0,
    "alibi_slopes": None,
    "qv": None,
    "q_descale": None,
    "k_descale": None,
    "v_descale": None,
    "attention_chunk": 0,
}
# FA3's performance hints: they never change the result, so any value is accepted.
HINTS = ("pack_gqa", "num_splits")
_EXPLANATIONS = {
    # FA3 and FA4 take softmax_scale 4th; FA2's order (flash_attn_func here) takes dropout_p
    # there. (In the varlen functions FA3's 8th argument is the seqused_q tensor, which
    # flash_attn_varlen_func refuses by its type.)
    "dropout_p": "attention dropout; if this is a softmax scale passed 4th in FA3's order, use "
                 "dash_attn.flash_attn_interface.{function} or softmax_scale=",
}


def check_unsupported(function, **features):
    """Raise NotImplementedError naming every keyword set to an unsupported value."""
    on = [name for name, value in features.items() if name not in UNSUPPORTED_FEATURES or not _is_off(name, value)]
    if not on:  # every call that runs: the message below is built only for a refusal
        return
    explain = {name: text.format(function=function) for name, text in _EXPLANATIONS.items()}
    if function.endswith("varlen_func"):
        explain.pop("dropout_p")  # a scale cannot land there in FA3's varlen order
    asked = [f"{name}={_shown(features[name])}" + (f" ({explain[name]})" if name in explain else "") for name in on]
    raise NotImplementedError(f"dash_attn.{function}: not supported yet: {', '.join(asked)}")


def _shown(value):
    return f"<tensor of shape {tuple(value.shape)}>" if hasattr(value, "shape") else repr(value)


def _is_off(name, value):
    off = UNSUPPORTED_FEATURES[name]
    if off is None:
        return value is None  # identity: a tensor compared with None is no boolean
    if isinstance(off, tuple):
        return tuple(value) == off
    return value == off


def check_window(function, window_size):
    """FlashAttention's window_size = (left, right) as two ints; -1 (or FA4's
    None) is unbounded on that side. Returns (left, right)."""
    if isinstance(window_size, (str, bytes)) or not hasattr(window_size, "__len__") or len(window_size) != 2:
        raise ValueError(f"dash_attn.{function}: argument 'window_size': expected (left, right), two ints >= -1 "
                         f"(-1: unbounded), got {window_size!r}")
    sides = []
    for name, value in zip(("left", "right"), window_size):
        if value is None:
            value = -1
        if not isinstance(value, int) or isinstance(value, bool) or value < -1:
            raise ValueError(f"dash_attn.{function}: argument 'window_size': expected (left, right), two ints >= -1 "
                             f"(-1: unbounded), got {name} = {value!r}")
        sides.append(value)
    return tuple(sides)


def check_softcap(function, softcap):
    """softcap: a finite number >= 0 (0, or None, is off). Returns a float."""
    import math

    if softcap is None:
        return 0.0
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"dash_attn.{function}: argument 'softcap': expected a finite number >= 0 (0: off), "
                         f"got {softcap!r}")
    return float(softcap)


# Sink dtypes accepted: float32 is what the kernels read; bf16 and fp16 (FA4
# takes bf16 sinks, transformers casts them to the activations' dtype) are
# converted to float32 on the way in, with the gradient flowing back.
SINK_DTYPES = ("torch.float32", "torch.bfloat16", "torch.float16")


def check_sinks(function, sinks, q, heads_dim=2, name="learnable_sink"):
    """Learnable attention sinks: None, or a (heads_q,) floating tensor on q's
    device (q's heads along dimension heads_dim)."""
    if sinks is None:
        return
    if not hasattr(sinks, "shape") or not hasattr(sinks, "dtype"):
        raise TypeError(f"dash_attn.{function}: argument '{name}': expected a torch.Tensor or None, "
                        f"got {type(sinks).__name__}")
    heads_q = q.shape[heads_dim]
    if tuple(sinks.shape) != (heads_q,):
        raise ValueError(f"dash_attn.{function}: argument '{name}': expected shape ({heads_q},) (one logit per "
                         f"query head), got {tuple(sinks.shape)}")
    if str(sinks.dtype) not in SINK_DTYPES:
        raise TypeError(f"dash_attn.{function}: argument '{name}': expected dtype torch.float32 (or torch.bfloat16, "
                        f"torch.float16), got {sinks.dtype}")
    if sinks.device != q.device:
        raise ValueError(f"dash_attn.{function}: argument '{name}': expected device {q.device} like q, "
                         f"got {sinks.device}")


def check_sm_margin(function, sm_margin):
    if not isinstance(sm_margin, int) or isinstance(sm_margin, bool) or sm_margin < 0:
        raise ValueError(f"dash_attn.{function}: argument 'sm_margin': expected an int >= 0 (SMs to leave to "
                         f"other kernels), got {sm_margin!r}")


def check_schedule(function, schedule):
    if schedule not in SCHEDULES:
        raise ValueError(f"dash_attn.{function}: argument 'schedule': expected one of {', '.join(SCHEDULES)}, "
                         f"got {schedule!r}")


def check_varlen_schedule(function, schedule):
    """check_schedule, and a schedule the variable-length backward lacks is refused by name."""
    check_schedule(function, schedule)
    if schedule not in VARLEN_SCHEDULES:
        raise ValueError(f"dash_attn.{function}: argument 'schedule': {schedule!r} is not available for "
                         f"variable-length batches; expected one of {', '.join(VARLEN_SCHEDULES)}")


def check_qkv(function, q, k, v, head_dims_of=None):
    """Shapes (batch, seqlen, heads, head_dim), one CUDA device, one supported
    dtype. head_dims_of(dtype name) gives the head dims compiled for it (the
    loaded library's kernel table: _library.compiled_head_dims); None leaves
    that check to the library. Each tensor's shape, dtype and device are read
    once (torch builds a new object on every read: ~3 us of a 5 us check)."""
    seen = []
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not hasattr(t, "shape") or not hasattr(t, "dtype"):
            raise TypeError(f"dash_attn.{function}: argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
        shape = tuple(t.shape)
        if len(shape) != 4:
            raise ValueError(f"dash_attn.{function}: argument '{name}': expected 4 dimensions "
                             f"(batch, seqlen, heads, head_dim), got shape {shape}")
        device = t.device
        if getattr(device, "type", None) != "cuda":
            raise ValueError(f"dash_attn.{function}: argument '{name}': expected a CUDA tensor, got device {device}")
        dtype = t.dtype
        if str(dtype) not in SUPPORTED_DTYPES:
            raise TypeError(f"dash_attn.{function}: argument '{name}': expected dtype torch.bfloat16 or "
                            f"torch.float16, got {dtype}")
        seen.append((shape, dtype, device))
    (q_shape, q_dtype, q_device), (k_shape, _, _), (v_shape, _, _) = seen
    for name, (_, dtype, device) in zip(("k", "v"), seen[1:]):
        if dtype != q_dtype:
            raise TypeError(f"dash_attn.{function}: argument '{name}': expected dtype {q_dtype} like q, got {dtype}")
        if device != q_device:
            raise ValueError(f"dash_attn.{function}: argument '{name}': expected device {q_device} like q, got {device}")
    batch, _, heads_q, head_dim = q_shape
    head_dims = head_dims_of(str(q_dtype)) if head_dims_of is not None else None
    if head_dims is not None and head_dim not in head_dims:
        raise ValueError(f"dash_attn.{function}: argument 'q': expected head_dim in {tuple(head_dims)} (the kernels "
                         f"compiled for {q_dtype}), got {head_dim}")
    if k_shape != v_shape:
        raise ValueError(f"dash_attn.{function}: argument 'v': expected the shape of k {k_shape}, got {v_shape}")
    if k_shape[0] != batch or k_shape[3] != head_dim:
        raise ValueError(f"dash_attn.{function}: argument 'k': expected shape ({batch}, seqlen_k, heads_kv, {head_dim}) "
                         f"to match q {q_shape}, got {k_shape}")
    heads_kv = k_shape[2]
    if heads_q % heads_kv != 0:
        raise ValueError(f"dash_attn.{function}: argument 'k': expected heads_kv dividing heads_q = {heads_q} "
                         f"(GQA/MQA), got {heads_kv}")
    for name, (shape, _, _) in zip(("q", "k", "v"), seen):
        if 0 in shape:
            raise ValueError(f"dash_attn.{function}: argument '{name}': empty tensors are not accepted, "
                             f"got shape {shape}")


def needs_copy(t):
    """True when the kernels cannot read the tensor in place (TMA needs a
    contiguous last dimension, 16-byte aligned base and strides). Such inputs
    are copied, as FlashAttention does for a non-contiguous last dimension."""
    if t.data_ptr() % 16 != 0:
        return True
    # The common case in two calls (the loop below costs ~4 us a tensor, 7
    # tensors a forward + backward): contiguous, so every stride is a
    # multiple of the last size.
    if t.shape[-1] % 8 == 0 and t.is_contiguous() and t.stride(-1) == 1:
        return False
    strides = t.stride()
    if strides[-1] != 1:
        return True
    return any(size > 1 and (stride <= 0 or stride % 8 != 0) for size, stride in zip(t.shape[:-1], strides[:-1]))


def resolve_deterministic(function, deterministic, schedule, torch_deterministic):
    """The (deterministic, schedule) pair to run, honouring
    torch.use_deterministic_algorithms: a non-deterministic request is upgraded
    to the deterministic default, with a warning, never silently ignored."""
    import warnings

    check_schedule(function, schedule)
    if schedule == "atomic" and deterministic:
        raise ValueError(f"dash_attn.{function}: schedule='atomic' is not deterministic; pass deterministic=False "
                         "or choose another schedule")
    if not deterministic and schedule not in ("atomic", "auto"):
        raise ValueError(f"dash_attn.{function}: schedule={schedule!r} is deterministic but deterministic=False; "
                         "use schedule='atomic' or 'auto'")
    if not deterministic and torch_deterministic:
        warnings.warn(f"dash_attn.{function}: deterministic=False under torch.use_deterministic_algorithms(True); "
                      "running the deterministic backward instead", stacklevel=3)
        return True, "auto"
    return deterministic, schedule
