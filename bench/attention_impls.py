"""The attention implementations the benchmarks compare, behind one interface.
make(name) gives an object with
    unavailable()                     None, or why it cannot run here at all
    mode(deterministic)               context held around every call of that mode
    function(causal, deterministic)   attn(q, k, v) -> out
    layout                            the memory order it reads natively
q is (batch, seqlen_q, heads_q, head_dim), k and v (batch, seqlen_k,
heads_kv, head_dim), out like q: FlashAttention's index order for every
implementation. SDPA and FlexAttention index (batch, heads, seqlen,
head_dim): they see the same tensors transposed, a view. Their memory may be
either order: bench/peers.py lays each implementation's inputs out in its
`layout` (same values); the end-to-end block gives every implementation the
projections' (batch, seqlen, heads, head_dim) memory, as a model does."""
import contextlib
import importlib

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


class DashAttn:
    """dash_attn.flash_attn_func: deterministic=True with the 'auto' schedule,
    False with 'atomic' (dQ accumulated with atomics). torch's deterministic
    mode stays off, else the package would (rightly) upgrade
    deterministic=False."""

    layout = "bshd"

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
            out = func(q, k, v, causal=causal, deterministic=deterministic)
            return out[0] if isinstance(out, tuple) else out
        return attn


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
