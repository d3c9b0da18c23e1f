"""Loads the C ABI library (libdash_attn_capi.so) with ctypes and wraps its
calls. The compiled code links no framework, so one build serves any torch.

The constants mirror include/dash_attn/c_api.h by value (tests/python/test_c_abi.py
compares them with the header). This module imports nothing of the package, so
that test loads it by path without torch or the library."""

import ctypes
import functools
import os
import pathlib

# The header's version; the library must report the same from dash_abi_version().
DASH_ATTN_ABI_VERSION = 5

DASH_DTYPE_BF16 = 0
DASH_DTYPE_FP16 = 1

DASH_PASS_FORWARD = 0
DASH_PASS_BACKWARD = 1

DASH_SCHEDULE_ATOMIC = 0
DASH_SCHEDULE_FA3 = 1
DASH_SCHEDULE_DESCENDING = 2
DASH_SCHEDULE_SHIFT = 3
DASH_SCHEDULE_SYMMETRIC_SHIFT = 4
DASH_SCHEDULE_AUTO = 5

DASH_OK = 0
DASH_ERROR_INVALID_ARGUMENT = 1
DASH_ERROR_NOT_SUPPORTED = 2
DASH_ERROR_NOT_IMPLEMENTED = 3
DASH_ERROR_UNSAFE_SCHEDULE = 4
DASH_ERROR_CUDA = 5

# The Python API's schedule names (_checks.SCHEDULES) -> the code sent in DashOptions.schedule.
SCHEDULE_CODES = {
    "atomic": DASH_SCHEDULE_ATOMIC,
    "fa3": DASH_SCHEDULE_FA3,
    "descending": DASH_SCHEDULE_DESCENDING,
    "shift": DASH_SCHEDULE_SHIFT,
    "symmetric_shift": DASH_SCHEDULE_SYMMETRIC_SHIFT,
    "auto": DASH_SCHEDULE_AUTO,
}

# Return code -> the Python exception a caller expects. A shape this build
# cannot serve (head_dim, length limits) is a ValueError, as the Python checks
# raise for the same shapes; an unsafe schedule is a runtime condition of the device.
ERROR_EXCEPTIONS = {
    DASH_ERROR_INVALID_ARGUMENT: ValueError,
    DASH_ERROR_NOT_SUPPORTED: ValueError,
    DASH_ERROR_NOT_IMPLEMENTED: NotImplementedError,
    DASH_ERROR_UNSAFE_SCHEDULE: RuntimeError,
    DASH_ERROR_CUDA: RuntimeError,
}


class Shape(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim")]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p)] + [
        (name, ctypes.c_int64) for name in ("batch_stride", "seq_stride", "head_stride", "dim_stride")]


class Lse(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("batch_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64)]


class VarlenLengths(ctypes.Structure):
    """DashVarlenLengths: the int32 arrays are device pointers; seqused_* may be null."""
    _fields_ = [("total_q", ctypes.c_int64), ("total_k", ctypes.c_int64)] + [
        (name, ctypes.c_void_p) for name in ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k")]


class KernelRow(ctypes.Structure):
    """score_mods: 1 for the row with sliding windows and softcap, 0 for the plain one (both take sinks)."""
    _fields_ = [("pass_", ctypes.c_int32), ("dtype", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("score_mods", ctypes.c_int32)]


class Options(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("has_softmax_scale", ctypes.c_int32), ("softmax_scale", ctypes.c_float),
                ("deterministic", ctypes.c_int32), ("schedule", ctypes.c_int32), ("max_ctas", ctypes.c_int32),
                ("sm_margin", ctypes.c_int32), ("has_window", ctypes.c_int32), ("window_left", ctypes.c_int32),
                ("window_right", ctypes.c_int32), ("softcap", ctypes.c_float)]


class Sinks(ctypes.Structure):
    """DashSinks: heads_q fp32 device arrays; dsinks null when no gradient is asked for."""
    _fields_ = [("sinks", ctypes.c_void_p), ("dsinks", ctypes.c_void_p)]


_library = None


def library_path():
    explicit = os.environ.get("DASH_ATTN_LIBRARY")
    return pathlib.Path(explicit) if explicit else pathlib.Path(__file__).with_name("libdash_attn_capi.so")


def _load():
    global _library
    if _library is None:
        path = library_path()
        if not path.exists():
            raise ImportError(f"dash_attn: compiled library not found at {path}; install the package with "
                              "'pip install .' or set DASH_ATTN_LIBRARY to a built libdash_attn_capi.so")
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as error:
            raise ImportError(f"dash_attn: cannot load the compiled library {path}: {error}") from error
        _check_abi_version(lib, path)
        ptr = ctypes.POINTER
        lib.dash_forward.argtypes = ([ptr(Shape), ctypes.c_int32] + [ptr(Tensor)] * 4 +
                                     [ptr(Lse), ptr(Sinks), ptr(Options), ctypes.c_void_p])
        lib.dash_forward_varlen.argtypes = ([ptr(Shape), ptr(VarlenLengths), ctypes.c_int32] + [ptr(Tensor)] * 4 +
                                            [ptr(Lse), ptr(Sinks), ptr(Options), ctypes.c_void_p])
        lib.dash_backward.argtypes = ([ptr(Shape), ctypes.c_int32] + [ptr(Tensor)] * 5 + [ptr(Lse)] * 2 +
                                      [ptr(Tensor)] * 3 + [ctypes.c_void_p, ctypes.c_size_t, ptr(Sinks),
                                                           ptr(Options), ctypes.c_void_p])
        lib.dash_backward_workspace_size.argtypes = [ptr(Shape), ptr(Options), ptr(ctypes.c_size_t)]
        lib.dash_backward_varlen.argtypes = ([ptr(Shape), ptr(VarlenLengths), ctypes.c_int32] + [ptr(Tensor)] * 5 +
                                             [ptr(Lse)] * 2 + [ptr(Tensor)] * 3 +
                                             [ctypes.c_void_p, ctypes.c_size_t, ptr(Sinks), ptr(Options),
                                              ctypes.c_void_p])
        lib.dash_backward_varlen_workspace_size.argtypes = [ptr(Shape), ptr(VarlenLengths), ptr(Options),
                                                            ptr(ctypes.c_size_t)]
        lib.dash_last_error.restype = ctypes.c_char_p
        lib.dash_compiled_kernels.argtypes = [ptr(KernelRow), ctypes.c_int32]
        lib.dash_compiled_kernels.restype = ctypes.c_int32
        _library = lib
    return _library


def _check_abi_version(lib, path):
    """A library built from another c_api.h would misread the structs or codes, so refuse it
    before the first call; one older than the version function counts as a mismatch."""
    try:
        version_function = lib.dash_abi_version
    except AttributeError:
        found = "none (no dash_abi_version symbol)"
    else:
        version_function.argtypes = []
        version_function.restype = ctypes.c_int32
        found = version_function()
    if found != DASH_ATTN_ABI_VERSION:
        raise ImportError(f"dash_attn: the compiled library {path} has C ABI version {found}, but this Python package "
                          f"expects version {DASH_ATTN_ABI_VERSION}; rebuild it ('pip install .') or point "
                          "DASH_ATTN_LIBRARY at a libdash_attn_capi.so built from the same sources")


_compiled = None


def compiled_kernels():
    """The kernel table rows the loaded library compiled: [(pass, dtype, head_dim, score_mods)], pass and
    dtype as DASH_* codes, score_mods 1 for the rows with windows and softcap (every row takes sinks)."""
    global _compiled
    if _compiled is None:
        lib = _load()
        count = lib.dash_compiled_kernels(None, 0)
        rows = (KernelRow * count)()
        lib.dash_compiled_kernels(rows, count)
        _compiled = [(row.pass_, row.dtype, row.head_dim, row.score_mods) for row in rows]
    return _compiled


@functools.lru_cache(maxsize=None)
def compiled_head_dims(dtype_name, pass_code=DASH_PASS_FORWARD):
    """Head dims compiled for a dtype ('torch.bfloat16' / 'torch.float16') and
    pass, in either variant (plain or score mods: the library names a missing
    variant itself); asked on every call, so kept once computed (the library
    never changes)."""
    code = DASH_DTYPE_BF16 if dtype_name == "torch.bfloat16" else DASH_DTYPE_FP16
    return tuple(sorted({d for p, t, d, _ in compiled_kernels() if p == pass_code and t == code}))


def _raise_on_error(code):
    if code != DASH_OK:
        message = _load().dash_last_error().decode()
        raise ERROR_EXCEPTIONS.get(code, RuntimeError)(message)


@functools.lru_cache(maxsize=256)
def make_options(causal, softmax_scale, deterministic, schedule, max_ctas=0, sm_margin=0, window_left=-1,
                 window_right=-1, softcap=0.0):
    """DashOptions; window_left/right: FlashAttention's window_size (-1: unbounded), softcap 0: off.
    One object per distinct argument list (a call's options recur; the C ABI only reads them)."""
    if schedule not in SCHEDULE_CODES:
        raise ValueError(f"dash_attn: argument 'schedule': expected one of {', '.join(SCHEDULE_CODES)}, "
                         f"got {schedule!r}")
    return Options(int(causal), int(softmax_scale is not None), float(softmax_scale or 0.0), int(deterministic),
                   SCHEDULE_CODES[schedule], max_ctas, sm_margin, int(window_left >= 0 or window_right >= 0),
                   int(window_left), int(window_right), float(softcap))


def sinks_of(sinks, dsinks=None):
    """A DashSinks pointer for the compute calls, or None (null) without sinks.
    sinks / dsinks: contiguous (heads_q,) float32 device tensors, or None."""
    if sinks is None:
        return None
    return ctypes.byref(Sinks(sinks.data_ptr(), dsinks.data_ptr() if dsinks is not None else None))


def shape_of(q, k):
    return shape_of_sizes(q.shape, k.shape)


def shape_of_sizes(q_shape, k_shape):
    """DashShape of q (batch, seqlen_q, heads_q, head_dim) and k, v (batch,
    seqlen_k, heads_kv, head_dim) given as sizes."""
    batch, seqlen_q, heads_q, head_dim = q_shape
    return Shape(batch, seqlen_q, k_shape[1], heads_q, k_shape[2], head_dim)


def tensor_of(t):
    return Tensor(t.data_ptr(), *t.stride())


def lse_of(lse):
    return Lse(lse.data_ptr(), lse.stride(0), lse.stride(1))


def dtype_code(t):
    return DASH_DTYPE_BF16 if str(t.dtype) == "torch.bfloat16" else DASH_DTYPE_FP16


def forward(q, k, v, out, lse, options, stream, sinks=None):
    _raise_on_error(_load().dash_forward(ctypes.byref(shape_of(q, k)), dtype_code(q), *(
        ctypes.byref(tensor_of(t)) for t in (q, k, v, out)), ctypes.byref(lse_of(lse)), sinks_of(sinks),
        ctypes.byref(options), stream))


def varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k):
    """(Shape, VarlenLengths) of a packed batch: batch = sequences, seqlen_q/k =
    the longest sequences; the int32 arrays contiguous on the device, seqused_*
    None for none."""
    total_q, heads_q, head_dim = q.shape
    shape = Shape(cu_seqlens_q.shape[0] - 1, max_seqlen_q, max_seqlen_k, heads_q, k.shape[1], head_dim)
    arrays = (t.data_ptr() if t is not None else None for t in (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k))
    return shape, VarlenLengths(total_q, k.shape[0], *arrays)


def packed_tensor_of(t):
    """A packed (total, heads, head_dim) tensor: rows are tokens, there is no
    batch dimension, so the batch stride is 0 (unused)."""
    return Tensor(t.data_ptr(), 0, *t.stride())


def packed_lse_of(lse):
    """lse / dlse of a packed batch, (heads_q, total_q)."""
    return Lse(lse.data_ptr(), 0, lse.stride(0))


def forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, out, lse,
                   options, stream, sinks=None):
    """q, k, v, out packed (total, heads, head_dim); lse (heads_q, total_q)."""
    shape, lengths = varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                                    max_seqlen_k)
    tensors = [ctypes.byref(packed_tensor_of(t)) for t in (q, k, v, out)]
    _raise_on_error(_load().dash_forward_varlen(ctypes.byref(shape), ctypes.byref(lengths), dtype_code(q), *tensors,
                                                ctypes.byref(packed_lse_of(lse)), sinks_of(sinks),
                                                ctypes.byref(options), stream))


def backward_workspace_size(q_shape, k_shape, options):
    """Bytes of workspace for a backward on these sizes (shape_of_sizes)."""
    size = ctypes.c_size_t()
    _raise_on_error(_load().dash_backward_workspace_size(ctypes.byref(shape_of_sizes(q_shape, k_shape)),
                                                         ctypes.byref(options),
                                                         ctypes.byref(size)))
    return size.value


def backward(q, k, v, out, dout, lse, dlse, dq, dk, dv, workspace, options, stream, sinks=None, dsinks=None):
    """dlse: the gradient of lse (same layout) or None; sinks: the forward's,
    or None; dsinks: their gradient, written (None: not computed)."""
    tensors = [ctypes.byref(tensor_of(t)) for t in (q, k, v, out, dout)]
    grads = [ctypes.byref(tensor_of(t)) for t in (dq, dk, dv)]
    dlse_struct = ctypes.byref(lse_of(dlse)) if dlse is not None else None
    _raise_on_error(_load().dash_backward(ctypes.byref(shape_of(q, k)), dtype_code(q), *tensors,
                                          ctypes.byref(lse_of(lse)), dlse_struct, *grads, workspace.data_ptr(),
                                          workspace.numel(), sinks_of(sinks, dsinks), ctypes.byref(options), stream))


def backward_varlen_workspace_size(q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                                   max_seqlen_k, options):
    shape, lengths = varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                                    max_seqlen_k)
    size = ctypes.c_size_t()
    _raise_on_error(_load().dash_backward_varlen_workspace_size(ctypes.byref(shape), ctypes.byref(lengths),
                                                                ctypes.byref(options), ctypes.byref(size)))
    return size.value


def backward_varlen(q, k, v, out, dout, lse, dlse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                    max_seqlen_k, dq, dk, dv, workspace, options, stream, sinks=None, dsinks=None):
    """forward_varlen's layout: dout, dq, dk, dv packed like out, q, k, v; dlse
    like lse, or None; sinks and dsinks as backward's."""
    shape, lengths = varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                                    max_seqlen_k)
    tensors = [ctypes.byref(packed_tensor_of(t)) for t in (q, k, v, out, dout)]
    grads = [ctypes.byref(packed_tensor_of(t)) for t in (dq, dk, dv)]
    dlse_struct = ctypes.byref(packed_lse_of(dlse)) if dlse is not None else None
    _raise_on_error(_load().dash_backward_varlen(ctypes.byref(shape), ctypes.byref(lengths), dtype_code(q), *tensors,
                                                 ctypes.byref(packed_lse_of(lse)), dlse_struct, *grads,
                                                 workspace.data_ptr(), workspace.numel(), sinks_of(sinks, dsinks),
                                                 ctypes.byref(options), stream))
