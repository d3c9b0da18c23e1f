"""attn_implementation="dash_attn" on tiny random models whose attention has
a sliding window (Mistral), a sliding window and logit softcapping (Gemma 2)
or attention sinks (GPT-OSS, with its sliding layers): logits and every
parameter's gradient against the same weights through eager attention, a
plain batch and a left-padded one (the varlen path). Two backends, as in
test_transformers_varlen.py: "cpu" runs the custom ops on
reference_attention's CPU kernels (the integration's keywords and autograd,
the sinks' gradient included, without a GPU), "cuda" runs dash_attn's
kernels (skipped without an sm_90 GPU). A model class the installed
transformers lacks is skipped. Skipped without torch and transformers."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import dash_attn  # noqa: E402
from dash_attn import interface, ops  # noqa: E402
import reference_attention  # noqa: E402  (tests/python, beside this file)

dash_attn.register_transformers()
on_sm90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, head_dim=64)
SEQLEN = 40  # longer than every window below, so the windows hide keys
# bf16 through two layers: eager rounds its probabilities to bf16, dash_attn's
# kernels (and the CPU reference kernels) keep them in fp32 before P @ V.
# Measured on the CPU backend: logits within 0.8-1.6e-2, gradients within
# 1.1-2.6e-2 of eager; leaving out the window moves the logits by 0.3-0.56,
# the sinks by 0.33, the softcap by 0.32.
LOGIT_TOLERANCE = 5e-2
GRADIENT_TOLERANCE = 5e-2  # relative to each parameter's largest gradient

MODELS = {
    "mistral-window": ("MistralConfig", dict(sliding_window=8)),
    "gemma2-window-softcap": ("Gemma2Config", dict(sliding_window=8, attn_logit_softcapping=2.0,
                                                   final_logit_softcapping=None, query_pre_attn_scalar=64)),
    # One expert: a top-k router flips its choice on bf16-level differences, which no tolerance covers.
    "gpt-oss-sinks": ("GptOssConfig", dict(sliding_window=8, num_local_experts=1, num_experts_per_tok=1)),
}


@pytest.fixture(params=["cpu", "cuda"])
def device(request, monkeypatch):
    if request.param == "cuda":
        if not on_sm90:
            pytest.skip("needs an sm_90 GPU")
        yield "cuda"
        return
    monkeypatch.setattr(interface, "check_qkv", lambda *args: None)  # CPU tensors
    with reference_attention.cpu_kernels(ops):
        yield "cpu"


def build(name, implementation, device):
    config_name, options = MODELS[name]
    if not hasattr(transformers, config_name):
        pytest.skip(f"transformers {transformers.__version__} has no {config_name}")
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**SMALL, **options)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=implementation,
                                                          dtype=torch.bfloat16)
    if name == "gpt-oss-sinks":  # random sinks (the init leaves them at 0), so that they matter
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.sinks.normal_(0.0, 1.0)
    if name == "gemma2-window-softcap":  # scores of a few units, so that the cap bends them (measured on the CPU:
        with torch.no_grad():            # the logits move by 0.32 without softcap, 0.008 from eager with it)
            for layer in model.model.layers:
                layer.self_attn.q_proj.weight.mul_(8.0)
                layer.self_attn.k_proj.weight.mul_(8.0)
    return model.to(device)


def pair(name, device):
    tested = build(name, "dash_attn", device)
    eager = build(name, "eager", device)
    eager.load_state_dict(tested.state_dict())
    return tested, eager


def batch(device, padded):
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(1, SMALL["vocab_size"], (2, SEQLEN), generator=gen)
    mask = torch.ones_like(ids)
    if padded:
        mask[1, :11] = 0  # left padding
    labels = ids.masked_fill(mask == 0, -100)
    if padded:  # the first valid token is predicted from a pad's row (garbage in eager, zeros here): no loss there
        labels[1, 11] = -100
    return ids.to(device), mask.to(device), labels.to(device)


def relative_error(a, b):
    scale = b.float().abs().max().item()
    return (a.float() - b.float()).abs().max().item() / (scale if scale > 0 else 1.0)


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "left-padded"])
@pytest.mark.parametrize("name", list(MODELS))
def test_logits_and_gradients_match_eager(device, name, padded):
    tested, eager = pair(name, device)
    ids, mask, labels = batch(device, padded)
    arguments = dict(input_ids=ids, labels=labels, attention_mask=mask if padded else None)
    outputs = {}
    for label, model in (("dash_attn", tested), ("eager", eager)):
        result = model(**arguments)
        result.loss.backward()
        outputs[label] = (result.logits.float(), {n: p.grad for n, p in model.named_parameters()})
    valid = mask.bool()
    logits, expected = outputs["dash_attn"][0][valid], outputs["eager"][0][valid]
    assert (logits - expected).abs().max().item() < LOGIT_TOLERANCE
    grads, expected_grads = outputs["dash_attn"][1], outputs["eager"][1]
    assert grads.keys() == expected_grads.keys()
    for parameter, grad in grads.items():
        if expected_grads[parameter] is None:
            continue
        assert grad is not None, parameter
        assert relative_error(grad, expected_grads[parameter]) < GRADIENT_TOLERANCE, parameter
    if name == "gpt-oss-sinks":  # the sinks' gradient arrived (through the fp32 conversion) and is not zero
        sinks = tested.model.layers[0].self_attn.sinks
        assert sinks.grad is not None and sinks.grad.abs().max() > 0
