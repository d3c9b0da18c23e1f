"""The PyTorch package on an sm_90 GPU: accuracy against SDPA in fp64,
custom-op contracts, torch.compile, CUDA graphs, bitwise reproducible
training steps and the transformers integration. Skipped elsewhere."""
import threading

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)

import dash_attn  # noqa: E402
from dash_attn import ops  # noqa: E402

F = torch.nn.functional


def reference(q, k, v, causal, dtype=torch.float64):
    """SDPA in higher precision on the same inputs, bottom-right causal."""
    qt, kt, vt = (t.detach().to(dtype).transpose(1, 2).requires_grad_() for t in (q, k, v))
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    mask = None
    if causal:
        rows = torch.arange(seqlen_q, device=q.device)[:, None]
        cols = torch.arange(seqlen_k, device=q.device)[None, :]
        mask = cols <= rows + seqlen_k - seqlen_q
    groups = q.shape[2] // k.shape[2]
    kt_full, vt_full = (t.repeat_interleave(groups, dim=1) for t in (kt, vt))
    scores = qt @ kt_full.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = (probs @ vt_full).transpose(1, 2)
    return out, (qt, kt, vt)


def inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda s, h: torch.randn(batch, s, h, head_dim, device="cuda", dtype=dtype, generator=gen).requires_grad_()
    return make(seqlen_q, heads_q), make(seqlen_k, heads_kv), make(seqlen_k, heads_kv)


def max_error(a, b):
    return (a.double() - b.double()).abs().max().item()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 128, 128, 4, 4, 128), (1, 257, 113, 8, 2, 64), (2, 77, 300, 4, 1, 128),
                                   (1, 190, 190, 2, 1, 256)])
def test_forward_and_gradients_match_sdpa(shape, causal):
    q, k, v = inputs(*shape)
    out = dash_attn.flash_attn_func(q, k, v, causal=causal)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    exact, leaves = reference(q, k, v, causal)
    exact_grads = torch.autograd.grad(exact, leaves, dout.double())
    naive, naive_leaves = reference(q, k, v, causal, dtype=torch.bfloat16)
    naive_grads = torch.autograd.grad(naive, naive_leaves, dout)
    # FlashAttention-3's rule: within 2x the error of a naive bf16 implementation, plus atol.
    assert max_error(out, exact) <= 2 * max_error(naive, exact) + 1e-3
    # The reference's leaves are in SDPA's (batch, heads, seqlen, head_dim) layout.
    for name, g, e, n in zip("qkv", grads, exact_grads, naive_grads):
        assert max_error(g.transpose(1, 2), e) <= 2 * max_error(n, e) + 1e-3, f"d{name}"


def test_sdpa_layout_entry_point():
    q, k, v = inputs(2, 128, 128, 4, 2, 128)
    out = dash_attn.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True,
                                                 enable_gqa=True)
    assert torch.equal(out.transpose(1, 2), dash_attn.flash_attn_func(q, k, v, causal=True))


def test_custom_ops_pass_opcheck():
    q, k, v = inputs(1, 128, 128, 2, 2, 64)
    torch.library.opcheck(ops.fwd, (q, k, v, 0.125, True, True, "auto", 0))
    # bwd is the backward formula itself (it has none of its own): check it on plain tensors.
    q, k, v = (t.detach() for t in (q, k, v))
    out, lse = ops.fwd(q, k, v, 0.125, True, True, "auto", 0)
    for dlse in (None, torch.randn_like(lse)):
        torch.library.opcheck(ops.bwd, (torch.randn_like(out), dlse, q, k, v, out, lse, 0.125, True, True, "auto", 0))


@pytest.mark.parametrize("use", ["out", "lse", "both"])
def test_eager_path_gives_the_op_paths_bits(use, monkeypatch):
    """ops.forward's autograd.Function (eager calls) against the custom op
    (forced by making _eager refuse): the same out, lse and gradients, bit
    for bit, with sinks, GQA and a gradient through out, lse or both."""
    def run(eager):
        monkeypatch.setattr(ops, "_eager", lambda inputs: "function" if eager else None)
        q, k, v = inputs(2, 200, 160, 4, 2, 128, seed=5)
        sinks = torch.randn(4, device="cuda", generator=torch.Generator(device="cuda").manual_seed(6)).requires_grad_()
        out, lse = dash_attn.flash_attn_func(q, k, v, causal=True, learnable_sink=sinks, return_lse=True)
        gen = torch.Generator(device="cuda").manual_seed(7)
        dout = torch.randn(out.shape, device="cuda", dtype=out.dtype, generator=gen)
        loss = {"out": (out * dout).sum(), "lse": lse.sum(), "both": (out * dout).sum() + lse.sum()}[use]
        return (out, lse) + torch.autograd.grad(loss.float(), (q, k, v, sinks))
    eager, op = run(True), run(False)
    for name, a, b in zip(["out", "lse", "dq", "dk", "dv", "dsinks"], eager, op):
        assert torch.equal(a, b), name


def test_eager_varlen_path_gives_the_op_paths_bits(monkeypatch):
    """ops.forward_varlen's autograd.Function against the custom op, as above."""
    lengths = [70, 0, 131, 5]
    offsets = torch.tensor([0, 70, 70, 201, 206], dtype=torch.int32, device="cuda")

    def run(eager):
        monkeypatch.setattr(ops, "_eager", lambda inputs: "function" if eager else None)
        gen = torch.Generator(device="cuda").manual_seed(9)
        q, k, v = (torch.randn(206, h, 64, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
                   for h in (4, 2, 2))
        out, lse = dash_attn.flash_attn_varlen_func(q, k, v, offsets, offsets, max(lengths), max(lengths),
                                                    causal=True, return_lse=True)
        dout = torch.randn(out.shape, device="cuda", dtype=out.dtype, generator=gen)
        return (out, lse) + torch.autograd.grad(((out * dout).sum() + lse.sum()).float(), (q, k, v))
    eager, op = run(True), run(False)
    for name, a, b in zip(["out", "lse", "dq", "dk", "dv"], eager, op):
        assert torch.equal(a, b), name


def test_double_backward_is_refused():
    """No second-order gradients: an error, never a gradient silently missing its dq-dependent part."""
    q, k, v = inputs(1, 64, 64, 2, 2, 64)
    with pytest.raises(RuntimeError):
        (dq,) = torch.autograd.grad(dash_attn.flash_attn_func(q, k, v).float().sum(), (q,), create_graph=True)
        torch.autograd.grad(dq.float().sum(), (q,))


def test_eager_path_only_for_plain_untraced_cuda_calls():
    q = torch.empty(1, device="cuda")
    assert ops._eager((q, 0.5, None)) == "direct"  # nothing requires a gradient
    assert ops._eager((q.requires_grad_(), 0.5, None)) == "function"
    with torch.no_grad():
        assert ops._eager((q, 0.5, None)) == "direct"
    assert ops._eager((q, torch.empty(1))) is None  # a CPU tensor: the op names the device problem
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        assert ops._eager((q,)) is None


@pytest.mark.parametrize("varlen", [False, True])
def test_no_grad_calls_give_the_autograd_paths_bits(varlen):
    """Without a gradient to record the eager path calls the implementation
    directly: the same out and lse as through the autograd.Function, and no
    grad_fn (as apply() under no_grad)."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (torch.randn(1, 206, h, 64, device="cuda", dtype=torch.bfloat16, generator=gen) for h in (4, 2, 2))
    offsets = torch.tensor([0, 70, 201, 206], dtype=torch.int32, device="cuda")

    def call(q, k, v):
        if varlen:
            return dash_attn.flash_attn_varlen_func(q[0], k[0], v[0], offsets, offsets, 131, 131, causal=True,
                                                    return_lse=True)
        return dash_attn.flash_attn_func(q, k, v, causal=True, return_lse=True)
    with torch.no_grad():
        direct = call(q, k, v)
    recorded = call(*(t.clone().requires_grad_() for t in (q, k, v)))
    assert all(t.grad_fn is None for t in direct) and all(t.grad_fn is not None for t in recorded)
    for name, a, b in zip(["out", "lse"], direct, recorded):
        assert torch.equal(a, b), name


def test_torch_compile_fullgraph():
    q, k, v = inputs(2, 256, 256, 4, 4, 128)
    compiled = torch.compile(lambda a, b, c: dash_attn.flash_attn_func(a, b, c, causal=True).sum(), fullgraph=True)
    compiled(q, k, v).backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_cuda_graph_capture_and_replay():
    q, k, v = inputs(2, 256, 256, 4, 4, 128)
    static_dout = torch.randn(2, 256, 4, 128, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside capture
            torch.autograd.grad(dash_attn.flash_attn_func(q, k, v, causal=True), (q, k, v), static_dout)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_grads = torch.autograd.grad(dash_attn.flash_attn_func(q, k, v, causal=True), (q, k, v), static_dout)
    graph.replay()
    eager = torch.autograd.grad(dash_attn.flash_attn_func(q, k, v, causal=True), (q, k, v), static_dout)
    for g, e in zip(static_grads, eager):
        assert torch.equal(g, e)


class Block(torch.nn.Module):
    def __init__(self, dim=512, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.proj = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        return self.proj(dash_attn.flash_attn_func(q, k, v, causal=True).reshape(b, s, d))


def train_steps(seed, steps=5):
    torch.manual_seed(seed)
    model = Block().cuda().to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(4, 512, 512, device="cuda", dtype=torch.bfloat16)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).float().pow(2).mean().backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def test_training_steps_are_bitwise_reproducible():
    first, second = train_steps(0), train_steps(0)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_transformers_llama_runs_with_dash_attn():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="dash_attn",
                                                          dtype=torch.bfloat16).cuda()
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    reference_model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa",
                                                                    dtype=torch.bfloat16).cuda()
    reference_model.load_state_dict(model.state_dict())
    assert abs(loss.item() - reference_model(input_ids=ids, labels=ids).loss.item()) < 2e-2


def tiny_model(transformers, config_class, attn_implementation, dtype=torch.bfloat16, **options):
    config = config_class(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, vocab_size=1000, **options)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation,
                                                         dtype=dtype).cuda()


@pytest.mark.parametrize("config_name, options, autocast", [
    ("MistralConfig", dict(sliding_window=128), False),  # a window of >= seqlen keys hides none: honoured
    ("Qwen2Config", dict(), False),
    ("LlamaConfig", dict(), True),  # float32 weights under bf16 autocast: RoPE makes q/k float32, cast back
])
def test_transformers_logits_match_sdpa(config_name, options, autocast):
    transformers = pytest.importorskip("transformers")
    config_class = getattr(transformers, config_name)
    dtype = torch.float32 if autocast else torch.bfloat16
    model = tiny_model(transformers, config_class, "dash_attn", dtype, **options)
    reference_model = tiny_model(transformers, config_class, "sdpa", dtype, **options)
    reference_model.load_state_dict(model.state_dict())
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        logits, expected = model(input_ids=ids).logits, reference_model(input_ids=ids).logits
    assert (logits.float() - expected.float()).abs().max().item() < 5e-2


def test_fresh_thread_beside_a_busy_stream_gives_the_same_bits():
    """A forward and backward from a thread that never used CUDA while another
    thread runs matmuls on its own stream: on 2026-12-01 (385d331) the forward's
    TMA descriptors failed there and the launch killed the CUDA context."""
    q, k, v = inputs(2, 700, 700, 4, 2, 128, seed=5)
    dout = torch.randn_like(q)

    def step():
        out = dash_attn.flash_attn_func(q, k, v, causal=True)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    reference = step()
    stop, results = threading.Event(), {}

    def busy():
        stream, a = torch.cuda.Stream(), torch.randn(2048, 2048, device="cuda")
        with torch.cuda.stream(stream):
            while not stop.is_set():
                a = (a @ a).tanh()
                stream.synchronize()

    def fresh():
        try:
            results["value"] = step()
        except Exception as error:  # reported below, on the test's thread
            results["error"] = error

    busy_thread, fresh_thread = threading.Thread(target=busy), threading.Thread(target=fresh)
    busy_thread.start()
    fresh_thread.start()
    fresh_thread.join()
    stop.set()
    busy_thread.join()
    assert "error" not in results, results.get("error")
    torch.cuda.synchronize()
    for name, expected, actual in zip(("out", "dq", "dk", "dv"), reference, results["value"]):
        assert torch.equal(expected, actual), name


def reference_with_lse(q, k, v, causal):
    """fp64 out and natural-log lse of the scaled scores, (batch, heads, seqlen) lse."""
    qt, kt, vt = (t.detach().double().transpose(1, 2).requires_grad_() for t in (q, k, v))
    groups = q.shape[2] // k.shape[2]
    kt_full, vt_full = (t.repeat_interleave(groups, dim=1) for t in (kt, vt))
    scores = qt @ kt_full.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        rows = torch.arange(q.shape[1], device=q.device)[:, None]
        cols = torch.arange(k.shape[1], device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows + k.shape[1] - q.shape[1], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = (torch.softmax(scores, dim=-1) @ vt_full).transpose(1, 2)
    return out, lse, (qt, kt, vt)


@pytest.mark.parametrize("use_out", [True, False])
@pytest.mark.parametrize("shape, causal", [((2, 200, 200, 4, 2, 128), True), ((1, 130, 260, 2, 1, 64), False)])
def test_lse_carries_its_gradient(shape, causal, use_out):
    """Ring attention merges partial results through lse, so its gradient must
    reach q and k: checked against fp64 autograd, with and without out's."""
    q, k, v = inputs(*shape, seed=3)
    out, lse = dash_attn.flash_attn_func(q, k, v, causal=causal, return_lse=True)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    loss = (lse * dlse).sum() + ((out.float() * dout.float()).sum() if use_out else 0)
    grads = torch.autograd.grad(loss, (q, k, v), allow_unused=True)
    exact_out, exact_lse, leaves = reference_with_lse(q, k, v, causal)
    assert max_error(lse, exact_lse) < 1e-2
    exact_loss = (exact_lse * dlse.double()).sum() + ((exact_out * dout.double()).sum() if use_out else 0)
    exact = torch.autograd.grad(exact_loss, leaves, allow_unused=True)
    for name, g, e in zip("qkv", grads, exact):
        e = torch.zeros_like(g, dtype=torch.float64) if e is None else e.transpose(1, 2)
        g = torch.zeros_like(e) if g is None else g
        scale = e.abs().max().item() + 1e-6
        assert max_error(g, e) / scale < 2e-2, name


def test_sm_margin_leaves_bits_unchanged_and_is_checked():
    q, k, v = inputs(2, 512, 512, 4, 2, 128, seed=9)
    dout = torch.randn_like(q)
    runs = []
    for margin in (0, 100):
        out = dash_attn.flash_attn_func(q, k, v, causal=True, sm_margin=margin, schedule="fa3")
        runs.append((out, *torch.autograd.grad(out, (q, k, v), dout)))
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with pytest.raises(ValueError, match="options.sm_margin"):
        dash_attn.flash_attn_func(q, k, v, sm_margin=sms)


def test_fa3_interface_matches_flash_attn_func():
    from dash_attn import flash_attn_interface
    q, k, v = inputs(2, 256, 256, 4, 2, 128, seed=4)
    out, lse = flash_attn_interface.flash_attn_func(q, k, v, 0.1, True, return_attn_probs=True, pack_gqa=True)
    expected, expected_lse = dash_attn.flash_attn_func(q, k, v, softmax_scale=0.1, causal=True, return_lse=True)
    assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
    qkv = torch.stack((q, q, q), dim=2).detach().requires_grad_()
    packed = dash_attn.flash_attn_qkvpacked_func(qkv, causal=True)
    packed.backward(torch.ones_like(packed))
    assert torch.equal(packed, dash_attn.flash_attn_func(q, q, q, causal=True))
    assert qkv.grad is not None and torch.isfinite(qkv.grad).all()
