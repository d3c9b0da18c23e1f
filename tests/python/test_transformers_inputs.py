"""attn_implementation="dash_attn" on tiny random transformers models, on the
CPU: every input the kernels cannot honour is refused by name before any
kernel would run; honoured inputs (is_causal, windows that hide no key, float32
activations, padding masks, packed rows) reach flash_attn_func or
flash_attn_varlen_func as they should; the conversion of a padding mask,
restarting position_ids or cu_seq_lens kwargs into a variable-length batch
(cu_seqlens, indices, max lengths, pack and unpack); registration is lazy and
tolerates an old transformers. Skipped without torch and transformers."""
import pathlib
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import dash_attn  # noqa: E402
from dash_attn import _transformers_inputs as inputs  # noqa: E402
from dash_attn import integrations, interface  # noqa: E402

dash_attn.register_transformers()
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, head_dim=64)


def tiny(config_class, **options):
    torch.manual_seed(0)
    config = config_class(**SMALL, **options)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="dash_attn",
                                                         dtype=torch.bfloat16)


def ids(length=8, batch=1):
    return torch.randint(0, SMALL["vocab_size"], (batch, length))


class Recorded(Exception):
    """Raised by the stand-in kernel: the call got past every check."""


@pytest.fixture
def recorded_calls(monkeypatch):
    """Stands in for flash_attn_func and flash_attn_varlen_func (no GPU here) and records their arguments."""
    calls = []

    def stand_in(q, k, v, softmax_scale=None, causal=False, **features):
        calls.append(dict(dtype=q.dtype, causal=causal, scale=softmax_scale, shape=tuple(q.shape), features=features))
        raise Recorded()

    def varlen_stand_in(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                        causal=False, **features):
        calls.append(dict(dtype=q.dtype, causal=causal, scale=softmax_scale, shape=tuple(q.shape),
                          k_shape=tuple(k.shape), cu_seqlens=(cu_seqlens_q.tolist(), cu_seqlens_k.tolist()),
                          max_seqlen=(max_seqlen_q, max_seqlen_k), varlen=True, features=features))
        raise Recorded()

    monkeypatch.setattr(interface, "flash_attn_func", stand_in)
    monkeypatch.setattr(interface, "flash_attn_varlen_func", varlen_stand_in)
    return calls


PACKED = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4]])


@pytest.mark.parametrize("build, run, named", [
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), cu_seq_lens_q=torch.tensor([0, 3, 8])),
     "cu_seq_lens_q without cu_seq_lens_k (packed sequences need both)"),
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8, batch=2), attention_mask=torch.tensor([[1] * 8, [0, 0] + [1] * 6]),
                 cu_seq_lens_q=torch.tensor([0, 3, 8]), cu_seq_lens_k=torch.tensor([0, 3, 8])),
     "cu_seq_lens_q/k together with attention_mask"),
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), seq_idx=torch.zeros(1, 8, dtype=torch.int32)),
     "seq_idx without packed sequences"),
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8), attention_mask=torch.ones(1, 1, 8, 8, dtype=torch.bool)),
     "attention_mask of shape (1, 1, 8, 8) (dash_attn takes a 2-D padding mask"),
    (lambda: tiny(transformers.LlamaConfig, attention_dropout=0.1).train(), lambda m: m(ids(8)), "dropout=0.1"),
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), some_future_option=1),
     "unknown keyword arguments ['some_future_option']"),
])
def test_refused_inputs_are_named(build, run, named, recorded_calls):
    model = build()
    with pytest.raises(NotImplementedError, match="attn_implementation='dash_attn'") as info:
        run(model)
    assert named in str(info.value)
    assert not recorded_calls


def test_output_attentions_is_refused(recorded_calls):
    with pytest.raises((NotImplementedError, ValueError), match="output_attentions|attention weights"):
        tiny(transformers.LlamaConfig)(ids(8), output_attentions=True)
    assert not recorded_calls


@pytest.mark.parametrize("build, run", [
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8))),
    (lambda: tiny(transformers.MistralConfig, sliding_window=8), lambda m: m(ids(8))),  # the window hides no key
    (lambda: tiny(transformers.Gemma2Config, sliding_window=16, attn_logit_softcapping=None,
                  final_logit_softcapping=None), lambda m: m(ids(8))),
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), position_ids=torch.arange(3, 11)[None])),
])
def test_honoured_inputs_reach_the_kernel(build, run, recorded_calls):
    with pytest.raises(Recorded):
        run(build())
    assert recorded_calls[0]["causal"] is True and recorded_calls[0]["dtype"] == torch.bfloat16
    assert "varlen" not in recorded_calls[0]
    assert recorded_calls[0]["features"] == {}  # a window that hides no key is not sent


def model_class(name):
    if not hasattr(transformers, name):
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    return getattr(transformers, name)


def test_sliding_window_becomes_flash_attentions_window_size(recorded_calls):
    """Eager's rule (masking_utils.sliding_window_overlay): key visible iff
    q_pos - k_pos < sliding_window, i.e. FlashAttention's (sliding_window - 1, 0)."""
    with pytest.raises(Recorded):
        tiny(model_class("MistralConfig"), sliding_window=4)(ids(8))
    assert recorded_calls[0]["features"] == dict(window_size=(3, 0)) and recorded_calls[0]["causal"] is True
    with pytest.raises(Recorded):  # packed: the longest document (5 keys) is longer than the window
        tiny(model_class("MistralConfig"), sliding_window=4)(ids(8), position_ids=PACKED)
    assert recorded_calls[-1]["varlen"] and recorded_calls[-1]["features"] == dict(window_size=(3, 0))


def test_gemma2_softcap_and_window_reach_the_kernel(recorded_calls):
    with pytest.raises(Recorded):  # layer 0 is a sliding layer
        tiny(model_class("Gemma2Config"), sliding_window=4, attn_logit_softcapping=50.0)(ids(8))
    assert recorded_calls[0]["features"] == dict(window_size=(3, 0), softcap=50.0)


def test_gpt_oss_sinks_reach_the_kernel(recorded_calls):
    model = tiny(model_class("GptOssConfig"), num_local_experts=2, num_experts_per_tok=1)
    with pytest.raises(Recorded):
        model(ids(8))
    sinks = recorded_calls[0]["features"]["learnable_sink"]
    assert sinks is model.model.layers[0].self_attn.sinks and tuple(sinks.shape) == (SMALL["num_attention_heads"],)


def test_a_bidirectional_sliding_window_is_refused(recorded_calls):
    query, key, value = qkv(torch.bfloat16)
    with pytest.raises(NotImplementedError, match=r"sliding_window=4 with is_causal=False and 8 keys \(bidirectional"):
        integrations.transformers_attention(Attention(torch.bfloat16), query, key, value, None, is_causal=False,
                                            sliding_window=4)
    with pytest.raises(NotImplementedError, match=r"sliding_window=0 \(expected a positive int\)"):
        integrations.transformers_attention(Attention(torch.bfloat16), query, key, value, None, sliding_window=0)
    with pytest.raises(Recorded):  # the window hides no key: nothing to honour
        integrations.transformers_attention(Attention(torch.bfloat16), query, key, value, None, is_causal=False,
                                            sliding_window=8)
    assert recorded_calls[-1]["features"] == {}


@pytest.mark.parametrize("build, run, cu_seqlens, max_seqlen, shapes", [
    # Right padding: the valid tokens of each row, packed.
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8, batch=2), attention_mask=torch.tensor([[1] * 8, [1] * 5 + [0] * 3])),
     ([0, 8, 13], [0, 8, 13]), (8, 8), ((13, 4, 64), (13, 2, 64))),
    # Left padding.
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8, batch=2), attention_mask=torch.tensor([[0, 0] + [1] * 6, [1] * 8])),
     ([0, 6, 14], [0, 6, 14]), (8, 8), ((14, 4, 64), (14, 2, 64))),
    # Packed rows: a document starts wherever a position does not follow its predecessor.
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), position_ids=PACKED),
     ([0, 3, 8], [0, 3, 8]), (5, 5), ((8, 4, 64), (8, 2, 64))),
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(4, batch=2), position_ids=torch.tensor([[0, 1, 0, 1], [5, 6, 7, 8]])),
     ([0, 2, 4, 8], [0, 2, 4, 8]), (4, 4), ((8, 4, 64), (8, 2, 64))),
    # DataCollatorWithFlattening's kwargs (with its position_ids and seq_idx).
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8), position_ids=PACKED, cu_seq_lens_q=torch.tensor([0, 3, 8], dtype=torch.int32),
                 cu_seq_lens_k=torch.tensor([0, 3, 8], dtype=torch.int32), max_length_q=5, max_length_k=5,
                 seq_idx=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]], dtype=torch.int32)),
     ([0, 3, 8], [0, 3, 8]), (5, 5), ((8, 4, 64), (8, 2, 64))),
    # cu_seq_lens as int64 and no max lengths: converted and read from them.
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8), cu_seq_lens_q=torch.tensor([0, 1, 8]), cu_seq_lens_k=torch.tensor([0, 1, 8])),
     ([0, 1, 8], [0, 1, 8]), (7, 7), ((8, 4, 64), (8, 2, 64))),
    # A window wider than every document hides no key: honoured.
    (lambda: tiny(transformers.MistralConfig, sliding_window=5), lambda m: m(ids(8), position_ids=PACKED),
     ([0, 3, 8], [0, 3, 8]), (5, 5), ((8, 4, 64), (8, 2, 64))),
])
def test_padded_and_packed_batches_reach_the_varlen_kernel(build, run, cu_seqlens, max_seqlen, shapes,
                                                           recorded_calls):
    with pytest.raises(Recorded):
        run(build())
    call = recorded_calls[0]
    assert call["varlen"] and call["causal"] is True and call["dtype"] == torch.bfloat16
    assert call["cu_seqlens"] == cu_seqlens and call["max_seqlen"] == max_seqlen
    assert (call["shape"], call["k_shape"]) == shapes


def test_packed_position_ids_with_a_cache_are_refused(recorded_calls):
    query, key, value = torch.randn(1, 4, 8, 64), torch.randn(1, 2, 12, 64), torch.randn(1, 2, 12, 64)
    with pytest.raises(NotImplementedError, match="position_ids that restart within a row with 12 keys for 8 "
                                                  "queries"):
        integrations.transformers_attention(Attention(torch.bfloat16), query.bfloat16(), key.bfloat16(),
                                            value.bfloat16(), None, position_ids=PACKED)
    assert not recorded_calls


# --- The conversion into a variable-length batch (no model) --------------------------------------------------------

def mask(*rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_padding_layout_right_and_left_padding():
    layout = inputs.padding_layout(mask([1, 1, 1, 0], [0, 0, 1, 1], [1, 1, 1, 1]), 4, 4)
    assert layout.cu_seqlens_q.tolist() == layout.cu_seqlens_k.tolist() == [0, 3, 5, 9]
    assert layout.cu_seqlens_q.dtype == torch.int32
    assert layout.indices_q.tolist() == layout.indices_k.tolist() == [0, 1, 2, 6, 7, 8, 9, 10, 11]
    assert (layout.max_seqlen_q, layout.max_seqlen_k, layout.keys) == (4, 4, None)


def test_padding_layout_of_a_decoding_step():
    """One query per row, the cache's keys (left padding): every row's query, its valid keys."""
    layout = inputs.padding_layout(mask([0, 0, 1, 1, 1], [1, 1, 1, 1, 1]), 1, 5)
    assert layout.cu_seqlens_q.tolist() == [0, 1, 2] and layout.indices_q is None and layout.max_seqlen_q == 1
    assert layout.cu_seqlens_k.tolist() == [0, 3, 8] and layout.indices_k.tolist() == [2, 3, 4, 5, 6, 7, 8, 9]
    assert layout.max_seqlen_k == 5


def test_padding_layout_of_a_chunk_after_a_cache():
    """q_len < keys: the queries are each row's last positions."""
    layout = inputs.padding_layout(mask([0, 1, 1, 1, 1], [1, 1, 1, 0, 0]), 2, 5)
    assert layout.cu_seqlens_q.tolist() == [0, 2, 2] and layout.indices_q.tolist() == [0, 1]
    assert layout.cu_seqlens_k.tolist() == [0, 4, 7] and layout.max_seqlen_q == 2


def test_padding_layout_of_a_static_cache_and_an_empty_row():
    """A mask shorter than the keys (StaticCache): keys past it are left out; a row of padding is empty."""
    layout = inputs.padding_layout(mask([1, 1, 1], [0, 0, 0]), 3, 8)
    assert layout.keys == 3 and layout.cu_seqlens_k.tolist() == [0, 3, 3] and layout.max_seqlen_k == 3
    q, k, v = (torch.arange(2 * n * 2, dtype=torch.float32).reshape(2, n, 2, 1) for n in (3, 8, 8))
    packed_q, packed_k, _ = layout.pack(q, k, v)
    assert packed_q.shape == (3, 2, 1) and torch.equal(packed_k, k[0, :3])
    assert inputs.padding_layout(mask([0, 0], [0, 0]), 2, 2).max_seqlen_k == 1  # a positive bound


def test_pack_and_unpack_restore_the_rows_with_zeros_at_the_pads():
    layout = inputs.padding_layout(mask([0, 1, 1], [1, 1, 0]), 3, 3)
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    packed_q, _, _ = layout.pack(q, q, q)
    assert torch.equal(packed_q, torch.stack([q[0, 1], q[0, 2], q[1, 0], q[1, 1]]))
    back = layout.unpack(packed_q, 2, 3)
    assert back.shape == q.shape and torch.equal(back[0, 1:], q[0, 1:]) and torch.equal(back[1, :2], q[1, :2])
    assert not back[0, 0].any() and not back[1, 2].any()
    back.sum().backward()  # differentiable: the pads get no gradient
    assert torch.equal(q.grad, mask([0, 1, 1], [1, 1, 0])[..., None, None].float().expand_as(q))


def test_packed_layout_from_position_ids():
    layout = inputs.packed_layout(torch.tensor([[0, 1, 2, 0, 0, 1, 2, 3]]), 1, 8)
    assert layout.cu_seqlens_q.tolist() == [0, 3, 4, 8] and layout.max_seqlen_q == 4 and layout.indices_q is None
    assert layout.cu_seqlens_q.dtype == torch.int32
    # Rows unsqueezed, not expanded (one row of ids for a batch of 2): each row starts a document.
    layout = inputs.packed_layout(torch.tensor([[0, 1, 0, 1, 2]]), 2, 5)
    assert layout.cu_seqlens_k.tolist() == [0, 2, 5, 7, 10] and layout.max_seqlen_k == 3
    # Not at 0 (RoBERTa-like offsets), and a restart to a larger position.
    assert inputs.packed_layout(torch.tensor([[2, 3, 4, 2, 3, 9, 10]]), 1, 7).cu_seqlens_q.tolist() == [0, 3, 5, 7]
    for plain in (torch.arange(8)[None], torch.arange(3, 11)[None].expand(2, -1), torch.zeros(1, 1), None):
        assert inputs.packed_layout(plain, 2 if plain is not None and plain.shape[0] == 2 else 1,
                                    plain.shape[1] if plain is not None else 8) is None
    assert inputs.packed_layout(torch.zeros(3, 1, 8, dtype=torch.long), 1, 8) is None  # not (batch, seqlen)


def test_given_layout_converts_the_offsets():
    layout = inputs.given_layout(torch.tensor([0, 3, 8]), torch.tensor([0, 4, 9]), None, 6, torch.device("cpu"))
    assert layout.cu_seqlens_q.dtype == layout.cu_seqlens_k.dtype == torch.int32
    assert (layout.max_seqlen_q, layout.max_seqlen_k) == (5, 6)
    layout = inputs.given_layout(torch.tensor([0, 3]), torch.tensor([0, 3]), torch.tensor(3), None,
                                 torch.device("cpu"))
    assert (layout.max_seqlen_q, layout.max_seqlen_k) == (3, 3)


def test_the_layout_is_kept_for_an_unchanged_tensor():
    padding = mask([1, 1, 0], [1, 1, 1])
    first = inputs.padding_layout(padding, 3, 3)
    assert inputs.padding_layout(padding, 3, 3) is first  # every layer of a forward: one sync
    assert inputs.padding_layout(padding, 1, 3) is not first  # another query length
    padding[0, 2] = True  # changed in place: computed again
    assert inputs.padding_layout(padding, 3, 3).cu_seqlens_k.tolist() == [0, 3, 6]


class Attention(torch.nn.Module):
    is_causal = True

    def __init__(self, dtype):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4, dtype=dtype)


def qkv(dtype=torch.float32):
    return (torch.randn(1, 2, 8, 64, dtype=dtype) for _ in range(3))


def test_is_causal_kwarg_overrides_the_module(recorded_calls):
    for is_causal, expected in ((False, False), (True, True), (None, True)):
        with pytest.raises(Recorded):
            integrations.transformers_attention(Attention(torch.bfloat16), *qkv(torch.bfloat16), None, scaling=0.5,
                                                is_causal=is_causal)
        assert recorded_calls[-1]["causal"] is expected and recorded_calls[-1]["scale"] == 0.5


def test_float32_inputs_are_cast_like_transformers_flash_attention(recorded_calls):
    with pytest.raises(Recorded):
        integrations.transformers_attention(Attention(torch.bfloat16), *qkv(), None)
    assert recorded_calls[-1]["dtype"] == torch.bfloat16
    with pytest.raises(Recorded), torch.autocast("cpu", dtype=torch.float16):
        integrations.transformers_attention(Attention(torch.float32), *qkv(), None)
    assert recorded_calls[-1]["dtype"] == torch.float16
    with pytest.raises(TypeError, match="the model runs in float32"):
        integrations.transformers_attention(Attention(torch.float32), *qkv(), None)


def run_python(code, *paths):
    path = ":".join(str(p) for p in (*paths, ROOT / "python"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"}, timeout=300)


def test_import_is_lazy_and_registers_when_models_load():
    result = run_python("""
        import sys
        import dash_attn
        assert "transformers" not in sys.modules, "import dash_attn imported transformers"
        from transformers import AttentionInterface, LlamaConfig
        assert "dash_attn" in AttentionInterface._global_mapping
        print("ok")
    """)
    assert result.stdout.strip() == "ok", result.stderr


def test_old_transformers_gets_a_clear_message(tmp_path):
    package = tmp_path / "transformers"
    package.mkdir()
    (package / "__init__.py").write_text('__version__ = "4.40.0"\n')
    (package / "modeling_utils.py").write_text("")
    result = run_python("""
        import warnings
        import dash_attn
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import transformers.modeling_utils
        print("warned:", [str(w.message) for w in caught])
        try:
            dash_attn.register_transformers()
        except ImportError as error:
            print("raised:", error)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warned:" in result.stdout and "transformers 4.40.0 has no attention registry" in result.stdout
    assert "raised: dash_attn.register_transformers: transformers 4.40.0" in result.stdout
