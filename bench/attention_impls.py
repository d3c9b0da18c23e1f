"""The attention implementations the benchmarks compare, behind one interface.
make(name) gives an object with
    unavailable()                     None, or why it cannot run here at all
    mode(deterministic)               context held around every call of that mode
    function(causal, deterministic)   attn(q, k, v) -> out, differentiable (autograd)
    layout                            the memory order it reads natively
    protocol                          how bench/peers.py times it: "autograd" (the
                                      forward through function(), the backward
                                      torch.autograd.grad) or "direct_op"
    direct(causal, deterministic)     only for "direct_op": (forward, backward),
                                      forward(q, k, v) -> (out, saved) and
                                      backward(q, k, v, out, saved, dout) -> (dq, dk, dv),
                                      direct op calls without autograd
    min_warmup                        untimed calls it needs at least (kernels
                                      compiled or plans built on first use)
q is (batch, seqlen_q, heads_q, head_dim), k and v (batch, seqlen_k,
heads_kv, head_dim), out like q: FlashAttention's index order for every
implementation. SDPA and FlexAttention index (batch, heads, seqlen,
head_dim): they see the same tensors transposed, a view. Their memory may be
either order: bench/peers.py lays each implementation's inputs out in its
`layout` (same values); the end-to-end block gives every implementation the
projections' (batch, seqlen, heads, head_dim) memory, as a model does."""
import contextlib
import importlib
import inspect

import torch

DASH = "dash_attn"


@contextlib.contextmanager
def torch_deterministic(enabled):
    """torch.use_deterministic_algorithms(enabled) for the block, restored
    after. Deterministic mode also fills fresh allocations with NaN by default;
    that fill is switched off here because it would be timed with the kernels
    and is no part of any attention algorithm."""
    was, was_warn_only = torch.are_deterministic_algorithms_enabled(), \
        torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(enabled)
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


def first_output(result):
    """out from an attention function that returns out or (out, lse, ...)."""
    return result[0] if isinstance(result, (tuple, list)) else result


class DashAttn:
    """dash_attn.flash_attn_func: deterministic=True with the 'auto' schedule,
    False with 'atomic' (dQ accumulated with atomics). torch's deterministic
    mode stays off, else the package would (rightly) upgrade
    deterministic=False. GQA/MQA (k, v with heads_kv dividing heads_q) and
    head_dim 64, 128 and 256 go to the package as they are."""

    layout = "bshd"
    protocol = "autograd"
    min_warmup = 0

    def unavailable(self):
        try:
            from dash_attn import _library
            _library._load()
        except Exception as error:  # ImportError, OSError from ctypes: report, run the peers
            return f"{type(error).__name__}: {error}"
        return None

    def mode(self, deterministic):
        return torch_deterministic(False)

    def function(self, causal, deterministic):
        import dash_attn

        # Named explicitly: the schedules dash-bench's auto and atomic rows run.
        schedule = "auto" if deterministic else "atomic"

        def attn(q, k, v):
            return dash_attn.flash_attn_func(q, k, v, causal=causal, deterministic=deterministic, schedule=schedule)
        return attn


class Sdpa:
    """torch.nn.functional.scaled_dot_product_attention restricted to one
    backend (None: SDPA's own choice). Deterministic mode is torch's global
    switch; a backend that has no deterministic algorithm is refused by SDPA
    ('No available kernel') or raises when its backward runs."""

    layout = "bhsd"
    protocol = "autograd"
    min_warmup = 0

    def __init__(self, backend):
        self.backend = backend

    def unavailable(self):
        return None

    @contextlib.contextmanager
    def mode(self, deterministic):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with torch_deterministic(deterministic):
            if self.backend is None:
                yield
            else:
                with sdpa_kernel(getattr(SDPBackend, self.backend)):
                    yield

    def function(self, causal, deterministic):
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def attn(q, k, v):
            out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                       enable_gqa=q.shape[2] != k.shape[2])
            return out.transpose(1, 2)
        return attn


def _causal(batch, head, q_index, kv_index):
    return q_index >= kv_index


class Flex:
    """flex_attention under torch.compile (eager flex_attention materializes
    the scores and is no benchmark). Static shapes (dynamic=False): each shape
    is compiled for itself, as a model of fixed shape would be; the warm-up
    calls absorb the compilation. Causal masks are a BlockMask, so fully
    masked tiles are skipped."""

    layout = "bhsd"
    protocol = "autograd"
    min_warmup = 1  # the torch.compile
    _compiled = None
    dynamic = False  # True: one compilation for all shapes (bench/peers.py --flex-dynamic)

    def unavailable(self):
        try:
            importlib.import_module("torch.nn.attention.flex_attention")
        except ImportError as error:
            return f"ImportError: {error}"
        return None

    def mode(self, deterministic):
        return torch_deterministic(False)

    @classmethod
    def _flex(cls):
        if cls._compiled is None:
            from torch.nn.attention.flex_attention import flex_attention

            # Every (shape, mask) is a recompilation of the same function; the
            # default limit (8) would fall back to eager after 8 of them.
            config = torch._dynamo.config
            config.recompile_limit = max(getattr(config, "recompile_limit", 8), 256)
            cls._compiled = torch.compile(flex_attention, dynamic=cls.dynamic)
        return cls._compiled

    def function(self, causal, deterministic):
        from torch.nn.attention.flex_attention import create_block_mask

        flex, masks = self._flex(), {}

        def attn(q, k, v):
            block_mask = None
            if causal:
                key = (q.shape[1], k.shape[1], str(q.device))
                if key not in masks:
                    masks[key] = create_block_mask(_causal, None, None, q.shape[1], k.shape[1], device=q.device)
                block_mask = masks[key]
            out = flex(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=block_mask,
                       enable_gqa=q.shape[2] != k.shape[2])
            return out.transpose(1, 2)
        return attn


class FlashAttnPackage:
    """FlashAttention-2 (flash_attn) or -3 (flash_attn_interface, built from
    hopper/): flash_attn_func(q, k, v, causal=, deterministic=). Some FA3
    versions return (out, lse)."""

    layout = "bshd"
    protocol = "autograd"
    min_warmup = 0

    def __init__(self, module):
        self.module_name = module

    def unavailable(self):
        try:
            self.module = importlib.import_module(self.module_name)
        except Exception as error:  # ImportError, or an extension built for another torch
            return f"{self.module_name} is not importable ({type(error).__name__}: {error})"
        return None

    def mode(self, deterministic):
        return torch_deterministic(False)

    def function(self, causal, deterministic):
        func = self.module.flash_attn_func

        def attn(q, k, v):
            return first_output(func(q, k, v, causal=causal, deterministic=deterministic))
        return attn


def _parameters(func):
    """The parameter names of a Python function, or None when it has no
    signature to read (a builtin): then nothing can be checked beforehand."""
    try:
        return inspect.signature(func).parameters
    except (TypeError, ValueError):
        return None


class FlashAttn4:
    """FlashAttention-4 (PyPI flash-attn-4, CuTe DSL; on sm_90 its Hopper
    path): flash_attn.cute.flash_attn_func(q, k, v, softmax_scale=, causal=,
    deterministic=) through its autograd function, on (batch, seqlen, heads,
    head_dim) tensors, GQA as kv heads dividing q heads. Depending on the
    version it returns out or (out, lse); out is taken. Kernels are compiled
    (seconds) on the first call of each (head_dim, causal, GQA ratio, ...)
    key: the warm-up calls (at least min_warmup) absorb that."""

    layout = "bshd"
    protocol = "autograd"
    min_warmup = 1
    module_name = "flash_attn.cute"
    needs = ("softmax_scale", "causal", "deterministic")

    def unavailable(self):
        try:
            module = importlib.import_module(self.module_name)
        except Exception as error:  # ImportError, or a CuTe DSL / CUDA binding that fails to load
            return f"{self.module_name} (FlashAttention-4) is not importable ({type(error).__name__}: {error})"
        func = getattr(module, "flash_attn_func", None)
        if not callable(func):
            return f"{self.module_name} has no flash_attn_func"
        parameters = _parameters(func)
        if parameters is not None and not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            missing = [name for name in self.needs if name not in parameters]
            if missing:
                return (f"{self.module_name}.flash_attn_func{inspect.signature(func)} lacks {', '.join(missing)}; "
                        f"this adapter calls flash_attn_func(q, k, v, {'=, '.join(self.needs)}=)")
        self.func = func
        return None

    def mode(self, deterministic):
        return torch_deterministic(False)

    def function(self, causal, deterministic):
        func = self.func

        def attn(q, k, v):
            return first_output(func(q, k, v, softmax_scale=q.shape[-1] ** -0.5, causal=causal,
                                     deterministic=deterministic))
        return attn


class CudnnFrontend:
    """cuDNN's SDPA through cudnn-frontend's PyTorch ops (PyPI
    nvidia-cudnn-frontend): importing cudnn.sdpa.fwd.torch_op registers
    torch.ops.cudnn.sdpa_fwd(q, k, v, attn_scale, is_causal=, return_lse=True)
    -> (out, lse) and torch.ops.cudnn.sdpa_bwd(grad_out, q, k, v, o, lse,
    attn_scale, is_causal=, is_deterministic=) -> (dq, dk, dv), on (batch,
    heads, seqlen, head_dim) tensors of any strides: here transposed views of
    our (batch, seqlen, heads, head_dim) memory (out, dq, dk, dv come back in
    the inputs' memory order, so dout's view has out's strides and is not
    copied). The ops' own autograd does not pass is_deterministic to the dense
    backward, so bench/peers.py calls both ops directly (protocol
    "direct_op"); function() wraps the same two calls in an autograd function
    for other users (the end-to-end block). The ops build and cache a cuDNN
    plan per shape and mode on first use: the warm-up absorbs that. Causal is
    cuDNN's top-left diagonal, the same as FlashAttention's bottom-right one
    for the square shapes benchmarked."""

    layout = "bshd"
    protocol = "direct_op"
    min_warmup = 1
    module_name = "cudnn.sdpa.fwd.torch_op"
    # The leading positional arguments and the keywords the adapter passes, as named in the ops' schemas.
    FWD_POSITIONAL, FWD_KEYWORDS = ("q", "k", "v", "attn_scale"), ("is_causal", "return_lse")
    BWD_POSITIONAL = ("grad_out", "q", "k", "v", "o", "lse", "attn_scale")
    BWD_KEYWORDS = ("is_causal", "is_deterministic")

    @staticmethod
    def _namespace():
        return getattr(torch.ops, "cudnn", None)

    @staticmethod
    def _schema_names(op):
        """The argument names of a torch op's schema; None when the op has none
        to read."""
        try:
            return [argument.name for argument in op.default._schema.arguments]
        except AttributeError:
            return None

    @classmethod
    def _schema_problem(cls, name, op, positional, keywords):
        names = cls._schema_names(op)
        if names is None:
            return None
        if tuple(names[:len(positional)]) != positional or any(k not in names for k in keywords):
            return (f"torch.ops.cudnn.{name} has arguments ({', '.join(names)}); this adapter calls "
                    f"{name}({', '.join(positional)}, {'=, '.join(keywords)}=) (cudnn-frontend 1.32's signature)")
        return None

    def unavailable(self):
        try:
            importlib.import_module(self.module_name)
        except Exception as error:  # ImportError, or cuDNN / the frontend's library failing to load
            return f"{self.module_name} (cudnn-frontend) is not importable ({type(error).__name__}: {error})"
        namespace = self._namespace()
        ops = {name: getattr(namespace, name, None) if namespace is not None else None
               for name in ("sdpa_fwd", "sdpa_bwd")}
        missing = [name for name, op in ops.items() if op is None]
        if missing:
            return f"{self.module_name} imported but registered no torch.ops.cudnn.{', '.join(missing)}"
        problem = (self._schema_problem("sdpa_fwd", ops["sdpa_fwd"], self.FWD_POSITIONAL, self.FWD_KEYWORDS)
                   or self._schema_problem("sdpa_bwd", ops["sdpa_bwd"], self.BWD_POSITIONAL, self.BWD_KEYWORDS))
        if problem:
            return problem
        self.fwd_op, self.bwd_op = ops["sdpa_fwd"], ops["sdpa_bwd"]
        return None

    def mode(self, deterministic):
        return torch_deterministic(False)

    @staticmethod
    def _tensors(name, result, count):
        if not isinstance(result, (tuple, list)) or len(result) != count or \
                not all(isinstance(t, torch.Tensor) for t in result):
            got = type(result).__name__ + (f" of {len(result)}" if isinstance(result, (tuple, list)) else "")
            raise RuntimeError(f"torch.ops.cudnn.{name} returned {got}; this adapter expects {count} tensors "
                               f"(cudnn-frontend 1.32: sdpa_fwd -> (out, lse), sdpa_bwd -> (dq, dk, dv))")
        return result

    def direct(self, causal, deterministic):
        fwd_op, bwd_op = self.fwd_op, self.bwd_op

        def bhsd(t):
            return t.detach().transpose(1, 2)

        def forward(q, k, v):
            out, lse = self._tensors("sdpa_fwd", fwd_op(bhsd(q), bhsd(k), bhsd(v), q.shape[-1] ** -0.5,
                                                        is_causal=causal, return_lse=True), 2)
            return out.transpose(1, 2), lse

        def backward(q, k, v, out, lse, dout):
            grads = self._tensors("sdpa_bwd", bwd_op(bhsd(dout), bhsd(q), bhsd(k), bhsd(v), bhsd(out), lse,
                                                     q.shape[-1] ** -0.5, is_causal=causal,
                                                     is_deterministic=deterministic), 3)
            return tuple(g.transpose(1, 2) for g in grads)
        return forward, backward

    def function(self, causal, deterministic):
        forward, backward = self.direct(causal, deterministic)

        def attn(q, k, v):
            return _DirectAttention.apply(q, k, v, forward, backward)
        return attn


class _DirectAttention(torch.autograd.Function):
    """A (forward, backward) pair of direct op calls as one autograd function."""

    @staticmethod
    def forward(ctx, q, k, v, forward, backward):
        out, saved = forward(q, k, v)
        ctx.save_for_backward(q, k, v, out, saved)
        ctx.backward_call = backward
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, saved = ctx.saved_tensors
        return (*ctx.backward_call(q, k, v, out, saved, dout), None, None)


def make(name):
    makers = {
        "dash_attn": DashAttn,
        "sdpa_flash": lambda: Sdpa("FLASH_ATTENTION"),
        "sdpa_cudnn": lambda: Sdpa("CUDNN_ATTENTION"),
        "sdpa_efficient": lambda: Sdpa("EFFICIENT_ATTENTION"),
        "sdpa_default": lambda: Sdpa(None),
        "flex": Flex,
        "fa2": lambda: FlashAttnPackage("flash_attn"),
        "fa3": lambda: FlashAttnPackage("flash_attn_interface"),
        "fa4": FlashAttn4,
        "cudnn": CudnnFrontend,
    }
    return makers[name]()


def available(variants):
    """The implementations named in (name, deterministic) variants that can run
    here, the reasons of those that cannot (printed), and the variants left."""
    implementations, skipped = {}, {}
    for name in dict.fromkeys(n for n, _ in variants):
        impl = make(name)
        reason = impl.unavailable()
        if reason:
            skipped[name] = reason
            print(f"skipped {name}: {reason}", flush=True)
        else:
            implementations[name] = impl
    return implementations, skipped, [(n, d) for n, d in variants if n in implementations]


def sdpa_default_choice(q, k, v, causal):
    """The backend SDPA picks by itself for these inputs (private API; None
    where it is missing)."""
    from torch.nn.attention import SDPBackend

    try:
        choice = torch._fused_sdp_choice(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, 0.0,
                                         causal, enable_gqa=q.shape[2] != k.shape[2])
        return SDPBackend(choice).name
    except Exception:  # noqa: BLE001: informative only
        return None
