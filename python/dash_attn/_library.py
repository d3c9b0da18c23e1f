"""Loads the C ABI library (libdash_attn_capi.so) with ctypes and wraps its
calls. The compiled code links no framework, so one build serves any torch."""

import ctypes
import os
import pathlib

from ._checks import SCHEDULES


class Shape(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim")]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p)] + [
        (name, ctypes.c_int64) for name in ("batch_stride", "seq_stride", "head_stride", "dim_stride")]


class Lse(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("batch_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64)]


class Options(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int32), ("has_softmax_scale", ctypes.c_int32), ("softmax_scale", ctypes.c_float),
                ("deterministic", ctypes.c_int32), ("schedule", ctypes.c_int32), ("max_ctas", ctypes.c_int32)]


# 1 + dash_attn::ErrorCode -> the Python exception a caller expects.
_ERRORS = {1: ValueError, 2: ValueError, 3: NotImplementedError, 4: RuntimeError, 5: RuntimeError}

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
        lib = ctypes.CDLL(str(path))
        ptr = ctypes.POINTER
        lib.dash_forward.argtypes = [ptr(Shape), ctypes.c_int32] + [ptr(Tensor)] * 4 + [ptr(Lse), ptr(Options),
                                                                                    ctypes.c_void_p]
        lib.dash_backward.argtypes = ([ptr(Shape), ctypes.c_int32] + [ptr(Tensor)] * 5 + [ptr(Lse)] +
                                      [ptr(Tensor)] * 3 + [ctypes.c_void_p, ctypes.c_size_t, ptr(Options),
                                                           ctypes.c_void_p])
        lib.dash_backward_workspace_size.argtypes = [ptr(Shape), ptr(Options), ptr(ctypes.c_size_t)]
        lib.dash_last_error.restype = ctypes.c_char_p
        _library = lib
    return _library


def _raise_on_error(code):
    if code != 0:
        message = _load().dash_last_error().decode()
        raise _ERRORS.get(code, RuntimeError)(message)


def make_options(causal, softmax_scale, deterministic, schedule, max_ctas=0):
    return Options(int(causal), int(softmax_scale is not None), float(softmax_scale or 0.0), int(deterministic),
                   SCHEDULES.index(schedule), max_ctas)


def shape_of(q, k):
    batch, seqlen_q, heads_q, head_dim = q.shape
    return Shape(batch, seqlen_q, k.shape[1], heads_q, k.shape[2], head_dim)


def tensor_of(t):
    return Tensor(t.data_ptr(), *t.stride())


def lse_of(lse):
    return Lse(lse.data_ptr(), lse.stride(0), lse.stride(1))


def dtype_code(t):
    return 0 if str(t.dtype) == "torch.bfloat16" else 1


def forward(q, k, v, out, lse, options, stream):
    _raise_on_error(_load().dash_forward(ctypes.byref(shape_of(q, k)), dtype_code(q), *(
        ctypes.byref(tensor_of(t)) for t in (q, k, v, out)), ctypes.byref(lse_of(lse)), ctypes.byref(options), stream))


def backward_workspace_size(q, k, options):
    size = ctypes.c_size_t()
    _raise_on_error(_load().dash_backward_workspace_size(ctypes.byref(shape_of(q, k)), ctypes.byref(options),
                                                         ctypes.byref(size)))
    return size.value


def backward(q, k, v, out, dout, lse, dq, dk, dv, workspace, options, stream):
    tensors = [ctypes.byref(tensor_of(t)) for t in (q, k, v, out, dout)]
    grads = [ctypes.byref(tensor_of(t)) for t in (dq, dk, dv)]
    _raise_on_error(_load().dash_backward(ctypes.byref(shape_of(q, k)), dtype_code(q), *tensors,
                                          ctypes.byref(lse_of(lse)), *grads, workspace.data_ptr(),
                                          workspace.numel(), ctypes.byref(options), stream))
