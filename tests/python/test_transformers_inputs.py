"""attn_implementation="dash_attn" on tiny random transformers models, on the
CPU: every input the kernels cannot honour is refused by name before any
kernel would run; honoured inputs (is_causal, windows that hide no key, float32
activations) reach flash_attn_func as they should; registration is lazy and
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
    """Stands in for flash_attn_func (no GPU here) and records its arguments."""
    calls = []

    def stand_in(q, k, v, softmax_scale=None, causal=False):
        calls.append(dict(dtype=q.dtype, causal=causal, scale=softmax_scale, shape=tuple(q.shape)))
        raise Recorded()

    monkeypatch.setattr(interface, "flash_attn_func", stand_in)
    return calls


@pytest.mark.parametrize("build, run, named", [
    (lambda: tiny(transformers.MistralConfig, sliding_window=4), lambda m: m(ids(8)), "sliding_window=4 with 8 keys"),
    (lambda: tiny(transformers.Gemma2Config, sliding_window=4, attn_logit_softcapping=None), lambda m: m(ids(8)),
     "sliding_window=4"),
    (lambda: tiny(transformers.Gemma2Config, sliding_window=64, attn_logit_softcapping=50.0), lambda m: m(ids(8)),
     "softcap=50.0"),
    (lambda: tiny(transformers.GptOssConfig, num_local_experts=2, num_experts_per_tok=1), lambda m: m(ids(8)),
     "s_aux (attention sinks)"),
    (lambda: tiny(transformers.LlamaConfig), lambda m: m(ids(8), position_ids=torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4]])),
     "position_ids that restart"),
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8), cu_seq_lens_q=torch.tensor([0, 3, 8]), cu_seq_lens_k=torch.tensor([0, 3, 8]),
                 max_length_q=5, max_length_k=5), "cu_seq_lens_q"),
    (lambda: tiny(transformers.LlamaConfig),
     lambda m: m(ids(8, batch=2), attention_mask=torch.tensor([[1] * 8, [0, 0] + [1] * 6])), "attention_mask"),
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
