"""attn_implementation="dash_attn" on padded and packed batches of a tiny
random Llama: logits of a padded batch (left and right padding) and of a
packed one (position_ids that restart, DataCollatorWithFlattening's kwargs)
against each sequence run alone; batched greedy generate with left padding
(prefill and decoding steps with the cache) against each sequence's full text
run alone; a packed or padded training step bitwise reproducible (with
torch's own deterministic kernels, warn-only), its loss that of the
documents alone. Two backends: "cpu" runs the varlen custom ops on
reference_attention's CPU kernels (the sequences alone through SDPA), so the
integration's index arithmetic and autograd run without a GPU; "cuda" runs
dash_attn's kernels (the sequences alone through dash_attn's fixed-length
path, and SDPA), skipped without an sm_90 GPU. Skipped without torch and
transformers."""
import contextlib
import pathlib
import sys
import warnings

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
# Measured on the CPU (bf16, this config): a sequence padded vs alone differs by ~2.5e-3 in the logits through
# SDPA; attending to the pads of a left-padded row moves them by ~0.65.
TOLERANCE = 2e-2


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


def took_the_varlen_path(device):
    if device == "cpu":
        assert "fwd_varlen" in reference_attention.cpu_kernel_calls()


def model(device, attn_implementation="dash_attn"):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SMALL)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation,
                                                         dtype=torch.bfloat16).to(device)


def references(device, tested):
    """Models with tested's weights that run a sequence alone: SDPA, and on
    the GPU dash_attn's fixed-length path too (no CPU kernel for it)."""
    made = []
    for implementation in ("sdpa",) + (("dash_attn",) if device == "cuda" else ()):
        reference = model(device, implementation)
        reference.load_state_dict(tested.state_dict())
        made.append(reference)
    return made


def documents(lengths, device, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(1, SMALL["vocab_size"], (n,), generator=gen).to(device) for n in lengths]


def alone_logits(reference, document):
    with torch.no_grad():
        return reference(input_ids=document[None]).logits[0].float()


def max_error(a, b):
    return (a.float() - b.float()).abs().max().item()


LENGTHS = [20, 13, 1, 17, 64, 65]
ROWS = [20, 13, 1, 56, 64, 17, 9]  # 90 + 90 tokens


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_logits_match_each_sequence_alone(device, side):
    tested = model(device)
    docs = documents(LENGTHS, device)
    longest = max(LENGTHS)
    ids = torch.zeros(len(docs), longest, dtype=torch.long, device=device)
    attention_mask = torch.zeros_like(ids)
    for row, doc in enumerate(docs):
        cols = slice(longest - len(doc), longest) if side == "left" else slice(0, len(doc))
        ids[row, cols], attention_mask[row, cols] = doc, 1
    with torch.no_grad():
        logits = tested(input_ids=ids, attention_mask=attention_mask).logits.float()
    took_the_varlen_path(device)
    for reference in references(device, tested):
        for row, doc in enumerate(docs):
            cols = slice(longest - len(doc), longest) if side == "left" else slice(0, len(doc))
            assert max_error(logits[row, cols], alone_logits(reference, doc)) < TOLERANCE, f"row {row}"


def flattened(docs):
    """DataCollatorWithFlattening over the documents: input_ids (1, total),
    labels, position_ids, cu_seq_lens_q/k, max_length_q/k, seq_idx."""
    collator = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)
    batch = collator([{"input_ids": doc.tolist()} for doc in docs])
    device = docs[0].device
    return {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in batch.items()}


@pytest.mark.parametrize("given", ["position_ids", "collator_kwargs", "rows"])
def test_packed_batch_logits_match_each_document_alone(device, given):
    tested = model(device)
    docs = documents(LENGTHS, device, seed=2)
    batch = flattened(docs)
    if given == "position_ids":
        arguments = dict(input_ids=batch["input_ids"], position_ids=batch["position_ids"])
    elif given == "collator_kwargs":
        arguments = {name: value for name, value in batch.items() if name != "labels"}
    else:  # two rows of 90 tokens, each packed with documents: the restarts of each row
        docs = documents(ROWS, device, seed=2)
        batch = flattened(docs)
        arguments = dict(input_ids=batch["input_ids"].view(2, 90), position_ids=batch["position_ids"].view(2, 90))
    with torch.no_grad():
        logits = tested(**arguments).logits.float().reshape(-1, SMALL["vocab_size"])
    took_the_varlen_path(device)
    starts = batch["cu_seq_lens_q"].tolist()
    for reference in references(device, tested):
        for i, doc in enumerate(docs):
            rows = slice(starts[i], starts[i] + len(doc))
            assert max_error(logits[rows], alone_logits(reference, doc)) < TOLERANCE, f"document {i}"


def test_batched_generate_with_left_padding_matches_each_sequence_alone(device):
    """Greedy generate over left-padded prompts (prefill, then decoding steps
    of one query against the cache): each step's logits equal those of the
    sequence's prompt + generated tokens run alone, at that position."""
    tested = model(device)
    prompts = documents([9, 4, 1, 12], device, seed=3)
    longest = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), longest, dtype=torch.long, device=device)
    attention_mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, longest - len(prompt):], attention_mask[row, longest - len(prompt):] = prompt, 1
    steps = 6
    with torch.no_grad():
        generated = tested.generate(input_ids=ids, attention_mask=attention_mask, max_new_tokens=steps,
                                    min_new_tokens=steps, do_sample=False, pad_token_id=0, output_logits=True,
                                    return_dict_in_generate=True)
    step_logits = torch.stack(generated.logits, dim=1).float()  # (batch, steps, vocab)
    took_the_varlen_path(device)
    new_tokens = generated.sequences[:, longest:]
    for reference in references(device, tested):
        for row, prompt in enumerate(prompts):
            text = torch.cat([prompt, new_tokens[row]])
            alone = alone_logits(reference, text)[len(prompt) - 1:len(prompt) - 1 + steps]
            assert max_error(step_logits[row], alone) < TOLERANCE, f"row {row}"


@contextlib.contextmanager
def torch_deterministic():
    """torch's own deterministic kernels where it has them (nn.Embedding's
    backward on CUDA is not deterministic otherwise), warnings elsewhere: what
    a bitwise reproducible training run sets; dash_attn is deterministic either way."""
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def training_step(device, layout):
    """One forward and backward of a packed or padded batch: (loss, gradients)."""
    with torch_deterministic():
        return _training_step(device, layout)


def _training_step(device, layout):
    tested = model(device).train()
    docs = documents(LENGTHS, device, seed=4)
    if layout == "packed":
        batch = flattened(docs)
        loss = tested(**batch).loss
    else:
        longest = max(LENGTHS)
        ids = torch.zeros(len(docs), longest, dtype=torch.long, device=device)
        attention_mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for row, doc in enumerate(docs):
            ids[row, :len(doc)], attention_mask[row, :len(doc)], labels[row, :len(doc)] = doc, 1, doc
        loss = tested(input_ids=ids, attention_mask=attention_mask, labels=labels).loss
    loss.backward()
    took_the_varlen_path(device)
    if device == "cpu":
        assert "bwd_varlen" in reference_attention.cpu_kernel_calls()
    return loss.detach(), [p.grad.detach().clone() for p in tested.parameters()], docs


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_training_step_is_bitwise_reproducible_and_matches_the_documents_alone(device, layout):
    loss, grads, docs = training_step(device, layout)
    again, grads_again, _ = training_step(device, layout)
    assert torch.equal(loss, again)
    for i, (g, h) in enumerate(zip(grads, grads_again)):
        assert torch.equal(g, h), f"parameter {i}"
    # The loss is the mean over every document's next-token predictions.
    reference = references(device, model(device))[0]
    total, count = 0.0, 0
    with torch.no_grad():
        for doc in docs:
            if len(doc) > 1:
                total += reference(input_ids=doc[None], labels=doc[None]).loss.float().item() * (len(doc) - 1)
                count += len(doc) - 1
    assert abs(loss.float().item() - total / count) < TOLERANCE
