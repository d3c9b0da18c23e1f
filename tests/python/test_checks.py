"""The Python API's argument rules, without torch or a GPU (CI)."""
import importlib.util
import pathlib
import warnings

import pytest

_path = pathlib.Path(__file__).resolve().parents[2] / "python" / "dash_attn" / "_checks.py"
_spec = importlib.util.spec_from_file_location("dash_attn_checks", _path)
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)


class Device:
    def __init__(self, kind="cuda", index=0):
        self.type, self.index = kind, index

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __repr__(self):
        return f"{self.type}:{self.index}"


class FakeTensor:
    """Only what the checks read: shape, dtype, device, stride(), data_ptr(),
    is_contiguous() (torch's rule: size-1 dimensions' strides ignored)."""

    def __init__(self, shape, dtype="torch.bfloat16", device=None, strides=None, ptr=4096):
        self.shape, self.dtype, self.device, self._ptr = tuple(shape), dtype, device or Device(), ptr
        if strides is None:
            strides, step = [], 1
            for size in reversed(self.shape):
                strides.insert(0, step)
                step *= size
        self._strides = tuple(strides)

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def is_contiguous(self):
        step = 1
        for size, stride in zip(reversed(self.shape), reversed(self._strides)):
            if size != 1 and stride != step:
                return False
            step *= size
        return True

    def data_ptr(self):
        return self._ptr


def qkv(q_shape=(2, 100, 8, 128), kv_shape=(2, 130, 2, 128), **q_kwargs):
    return FakeTensor(q_shape, **q_kwargs), FakeTensor(kv_shape), FakeTensor(kv_shape)


def test_valid_arguments_pass():
    checks.check_qkv("f", *qkv(), head_dims_of=lambda dtype: (64, 128, 256))


@pytest.mark.parametrize("mutation, error, fragment", [
    (dict(q_shape=(2, 100, 128)), ValueError, "'q': expected 4 dimensions"),
    (dict(device=Device("cpu")), ValueError, "'q': expected a CUDA tensor"),
    (dict(dtype="torch.float32"), TypeError, "'q': expected dtype torch.bfloat16 or torch.float16"),
    (dict(q_shape=(2, 100, 8, 96), kv_shape=(2, 130, 2, 96)), ValueError, "head_dim in (64, 128, 256)"),
    (dict(kv_shape=(2, 130, 3, 128)), ValueError, "heads_kv dividing heads_q = 8"),
    (dict(kv_shape=(3, 130, 2, 128)), ValueError, "'k': expected shape (2, seqlen_k, heads_kv, 128)"),
    (dict(q_shape=(2, 0, 8, 128)), ValueError, "'q': empty tensors"),
])
def test_bad_arguments_name_the_argument(mutation, error, fragment):
    q_shape = mutation.pop("q_shape", (2, 100, 8, 128))
    kv_shape = mutation.pop("kv_shape", (2, 130, 2, 128))
    with pytest.raises(error) as info:
        checks.check_qkv("flash_attn_func", *qkv(q_shape, kv_shape, **mutation), head_dims_of=lambda dtype: (64, 128, 256))
    assert fragment in str(info.value)
    assert "dash_attn.flash_attn_func" in str(info.value)


def test_mismatched_k_and_v_and_dtypes():
    q, k, _ = qkv()
    with pytest.raises(ValueError, match="'v': expected the shape of k"):
        checks.check_qkv("f", q, k, FakeTensor((2, 131, 2, 128)))
    with pytest.raises(TypeError, match="'k': expected dtype torch.bfloat16 like q"):
        checks.check_qkv("f", q, FakeTensor((2, 130, 2, 128), dtype="torch.float16"), FakeTensor((2, 130, 2, 128)))
    with pytest.raises(TypeError, match="'v': expected a torch.Tensor"):
        checks.check_qkv("f", q, k, [1, 2])


def test_unsupported_features_raise_not_implemented_naming_them():
    checks.check_unsupported("f", dropout_p=0.0, alibi_slopes=None, qv=None, attention_chunk=0)
    with pytest.raises(NotImplementedError, match=r"dropout_p=0.1.*attention_chunk=8"):
        checks.check_unsupported("f", dropout_p=0.1, attention_chunk=8)
    with pytest.raises(NotImplementedError, match=r"alibi_slopes=<tensor of shape \(8,\)>"):
        checks.check_unsupported("f", alibi_slopes=FakeTensor((8,)))
    with pytest.raises(NotImplementedError, match="q_descale"):
        checks.check_unsupported("f", q_descale=object())
    # Honoured now: not in the table of refused features, so a caller that still
    # sends them through check_unsupported gets them named, never dropped.
    assert not {"window_size", "softcap", "learnable_sink"} & set(checks.UNSUPPORTED_FEATURES)
    with pytest.raises(NotImplementedError, match="window_size"):
        checks.check_unsupported("f", window_size=(-1, -1))


def test_window_values():
    assert checks.check_window("f", (-1, -1)) == (-1, -1)
    assert checks.check_window("f", [128, 0]) == (128, 0)
    assert checks.check_window("f", (None, 5)) == (-1, 5)  # FA4's spelling of unbounded
    for bad, fragment in [((1,), "got (1,)"), ("ab", "got 'ab'"), (5, "got 5"), ((-2, 0), "left = -2"),
                          ((0, -3), "right = -3"), ((1.0, 0), "left = 1.0"), ((False, 0), "left = False")]:
        with pytest.raises(ValueError) as info:
            checks.check_window("flash_attn_func", bad)
        assert "dash_attn.flash_attn_func: argument 'window_size'" in str(info.value) and fragment in str(info.value)


def test_softcap_values():
    assert checks.check_softcap("f", 0.0) == 0.0 and checks.check_softcap("f", None) == 0.0
    assert checks.check_softcap("f", 30) == 30.0 and isinstance(checks.check_softcap("f", 30), float)
    for bad in (-1.0, float("inf"), float("nan"), True, "30"):
        with pytest.raises(ValueError, match="argument 'softcap': expected a finite number >= 0"):
            checks.check_softcap("f", bad)


def test_sinks_shape_dtype_and_device():
    q = FakeTensor((2, 100, 8, 128))
    checks.check_sinks("f", None, q)
    for dtype in ("torch.float32", "torch.bfloat16", "torch.float16"):
        checks.check_sinks("f", FakeTensor((8,), dtype=dtype), q)
    checks.check_sinks("f", FakeTensor((8,), dtype="torch.float32"), FakeTensor((300, 8, 128)), heads_dim=1)
    for sinks, error, fragment in [
        (FakeTensor((4,), dtype="torch.float32"), ValueError, "expected shape (8,) (one logit per query head), "
                                                              "got (4,)"),
        (FakeTensor((1, 8), dtype="torch.float32"), ValueError, "expected shape (8,)"),
        (FakeTensor((8,), dtype="torch.float64"), TypeError, "expected dtype torch.float32"),
        (FakeTensor((8,), dtype="torch.float32", device=Device("cpu")), ValueError, "expected device cuda:0 like q"),
        ([0.0] * 8, TypeError, "expected a torch.Tensor or None, got list"),
    ]:
        with pytest.raises(error) as info:
            checks.check_sinks("flash_attn_func", sinks, q)
        assert "dash_attn.flash_attn_func: argument 'learnable_sink'" in str(info.value)
        assert fragment in str(info.value)


def test_layouts_the_kernels_cannot_read_are_copied():
    assert not checks.needs_copy(FakeTensor((2, 100, 8, 128)))
    assert checks.needs_copy(FakeTensor((2, 100, 8, 128), strides=(102400, 1024, 128, 2)))  # strided last dim
    assert checks.needs_copy(FakeTensor((2, 100, 8, 128), ptr=4098))                       # misaligned base
    assert checks.needs_copy(FakeTensor((2, 100, 8, 128), strides=(102404, 1028, 128, 1)))  # 16-byte rule
    assert not checks.needs_copy(FakeTensor((1, 100, 1, 128), strides=(3, 128, 5, 1)))     # size-1 dims ignored
    assert checks.needs_copy(FakeTensor((2, 100, 8, 4)))      # contiguous, but 4-element (8-byte) head strides


def test_determinism_settings():
    assert checks.resolve_deterministic("f", True, "auto", False) == (True, "auto")
    assert checks.resolve_deterministic("f", False, "atomic", False) == (False, "atomic")
    with pytest.raises(ValueError, match="'atomic' is not deterministic"):
        checks.resolve_deterministic("f", True, "atomic", False)
    with pytest.raises(ValueError, match="'shift' is deterministic but deterministic=False"):
        checks.resolve_deterministic("f", False, "shift", False)
    with pytest.raises(ValueError, match="argument 'schedule'"):
        checks.resolve_deterministic("f", True, "fastest", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert checks.resolve_deterministic("f", False, "atomic", True) == (True, "auto")
    assert "use_deterministic_algorithms" in str(caught[0].message)


def test_varlen_schedules():
    for schedule in ("atomic", "fa3", "descending", "auto"):
        checks.check_varlen_schedule("flash_attn_varlen_func", schedule)
    for schedule in ("shift", "symmetric_shift"):
        with pytest.raises(ValueError) as info:
            checks.check_varlen_schedule("flash_attn_varlen_func", schedule)
        assert str(info.value) == (f"dash_attn.flash_attn_varlen_func: argument 'schedule': '{schedule}' is not "
                                   "available for variable-length batches; expected one of atomic, fa3, descending, auto")
    with pytest.raises(ValueError, match="expected one of atomic, fa3, descending, shift"):
        checks.check_varlen_schedule("f", "fastest")  # an unknown name gets check_schedule's message
    assert set(checks.VARLEN_SCHEDULES) < set(checks.SCHEDULES)
