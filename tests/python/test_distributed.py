"""dash_attn.distributed (ring attention, deterministic context parallelism).
On the CPU: the zigzag layout, the fixed-order merge of partial (out, lse)
against one softmax, and the ring itself on the gloo backend with 2 and 3
ranks (torch.multiprocessing spawn), the kernels stood in for by the float64
CPU kernels of reference_attention: out, lse and the q/k/v gradients against
single-process attention, causal (zigzag) and full, GQA 4/2, bitwise equal
over two reruns with the ranks' timing perturbed. On two or more sm_90 GPUs:
the same over NCCL in bf16 (skipped otherwise). Skipped without torch."""
import os
import pathlib
import random
import socket
import sys
import time

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from dash_attn import distributed, ops  # noqa: E402
import reference_attention  # noqa: E402  (tests/python, beside this file)

dist = torch.distributed
multi_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.device_count() >= 2
         and torch.cuda.get_device_capability() == (9, 0) and dist.is_nccl_available()),
    reason="needs two or more sm_90 GPUs and NCCL")

# (name, causal, heads_q, heads_kv)
CASES = [("causal_gqa", True, 4, 2), ("full_gqa", False, 4, 2), ("causal_mha", True, 2, 2)]
BATCH, CHUNK = 2, 4  # sequence length 2 * world_size * CHUNK
# The CPU stand-in kernels take any head_dim; the GPU kernels compile 64, 128 and 256.
HEAD_DIM = {torch.float64: 8, torch.bfloat16: 64}


def inputs(world_size, heads_q, heads_kv, dtype, device="cpu", seed=0):
    """Full-sequence q, k, v and the cotangents of out and lse, the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    seqlen = 2 * world_size * CHUNK
    make = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)
    d = HEAD_DIM[dtype]
    return dict(q=make(BATCH, seqlen, heads_q, d), k=make(BATCH, seqlen, heads_kv, d),
                v=make(BATCH, seqlen, heads_kv, d), dout=make(BATCH, seqlen, heads_q, d),
                dlse=make(BATCH, heads_q, seqlen))


def reference(t, causal):
    """out, lse and q/k/v gradients of single-process attention in float64."""
    q, k, v = (t[n].detach().double().cpu().requires_grad_() for n in "qkv")
    pairs = [reference_attention.attend(q[b], k[b], v[b], causal=causal) for b in range(q.shape[0])]
    out, lse = torch.stack([o for o, _ in pairs]), torch.stack([l for _, l in pairs])
    loss = (out * t["dout"].double().cpu()).sum() + (lse * t["dlse"].double().cpu()).sum()
    loss.backward()
    return dict(out=out.detach(), lse=lse.detach(), dq=q.grad, dk=k.grad, dv=v.grad)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world_size, port, backend, path):
    """One rank: every case twice (a random delay on one rank before the
    second run shifts the communication timing); saves its shards of out, lse
    and the gradients."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    on_gpu = backend == "nccl"
    if on_gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    device, dtype = ("cuda", torch.bfloat16) if on_gpu else ("cpu", torch.float64)
    results = {}
    try:
        if not on_gpu:  # CPU float64 tensors: the kernels' CUDA/bf16 rule is stood in for
            distributed.check_qkv = lambda *args: None
        kernels = reference_attention.cpu_kernels(ops) if not on_gpu else None
        if kernels is not None:
            kernels.__enter__()
        for name, causal, heads_q, heads_kv in CASES:
            t = inputs(world_size, heads_q, heads_kv, dtype, device)
            shard = {n: distributed.zigzag_shard(x, rank, world_size, dim=2 if n == "dlse" else 1)
                     for n, x in t.items()}
            runs = []
            for run in range(2):
                if run == 1 and rank == random.Random(port).randrange(world_size):
                    time.sleep(0.05)
                q, k, v = (shard[n].clone().requires_grad_() for n in "qkv")
                out, lse = distributed.ring_flash_attn_func(q, k, v, causal=causal, return_lse=True, sm_margin=2)
                wide = torch.float32 if on_gpu else torch.float64
                loss = (out.to(wide) * shard["dout"].to(wide)).sum() + (lse.to(wide) * shard["dlse"].to(wide)).sum()
                loss.backward()
                runs.append({n: x.detach().cpu() for n, x in
                             dict(out=out, lse=lse, dq=q.grad, dk=k.grad, dv=v.grad).items()})
            results[name] = runs
        if kernels is not None:
            results["calls"] = sorted(set(reference_attention.cpu_kernel_calls()))
            kernels.__exit__(None, None, None)
    finally:
        dist.destroy_process_group()
    torch.save(results, os.path.join(path, f"rank{rank}.pt"))


def run_ring(world_size, backend, tmp_path):
    torch.multiprocessing.spawn(_worker, args=(world_size, free_port(), backend, str(tmp_path)), nprocs=world_size)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world_size)]


def check(per_rank, world_size, atol, rtol, dtype):
    for name, causal, heads_q, heads_kv in CASES:
        want = reference(inputs(world_size, heads_q, heads_kv, dtype), causal)
        for run in range(2):
            got = {n: distributed.zigzag_unshard([r[name][run][n] for r in per_rank], dim=2 if n == "lse" else 1)
                   for n in want}
            for n in want:
                torch.testing.assert_close(got[n].double(), want[n], atol=atol, rtol=rtol,
                                           msg=lambda m: f"{name} run {run} {n}: {m}")
        for r in per_rank:  # bitwise over reruns
            for n, x in r[name][0].items():
                assert torch.equal(x, r[name][1][n]), f"{name} {n}: reruns differ in bits"


def test_zigzag_roundtrip():
    x = torch.arange(2 * 3 * 12 * 2).reshape(2, 12, 3, 2)
    shards = [distributed.zigzag_shard(x, r, 3) for r in range(3)]
    assert [s[0, :, 0, 0].div(12, rounding_mode="floor").tolist() for s in shards] == [
        [0, 0, 5, 5], [1, 1, 4, 4], [2, 2, 3, 3]]  # rank r: chunks r and 2R-1-r
    assert torch.equal(distributed.zigzag_unshard(shards), x)
    with pytest.raises(ValueError):
        distributed.zigzag_shard(x, 0, 5)


def test_merge_partials_equals_full_softmax():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(10, 4, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    k, v = k[:, :2], v[:, :2]  # GQA 4/2
    full_out, full_lse = reference_attention.attend(q, k, v)
    bounds = [0, 3, 4, 9, 10]
    partials = [tuple(t[None] for t in reference_attention.attend(q, k[a:b], v[a:b]))
                for a, b in zip(bounds, bounds[1:])]
    empty = (torch.zeros(1, 10, 4, 8, dtype=torch.float64), torch.full((1, 4, 10), float("-inf"), dtype=torch.float64))
    out, lse = distributed.merge_partials([empty] + partials + [empty])  # rows without keys weigh nothing
    torch.testing.assert_close(out[0], full_out, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(lse[0], full_lse, atol=1e-12, rtol=1e-12)
    again = distributed.merge_partials([empty] + partials + [empty])
    assert torch.equal(out, again[0]) and torch.equal(lse, again[1])
    nothing = distributed.merge_partials([empty, empty])
    assert torch.equal(nothing[0], empty[0]) and torch.equal(nothing[1], empty[1])
    # float32 partials (the kernels' lse) accumulate in float32
    out32, lse32 = distributed.merge_partials([(o.float(), l.float()) for o, l in partials])
    assert out32.dtype == lse32.dtype == torch.float32
    torch.testing.assert_close(out32[0].double(), full_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ring_cpu_gloo(world_size, tmp_path):
    per_rank = run_ring(world_size, "gloo", tmp_path)
    assert per_rank[0]["calls"] == ["bwd", "fwd"]  # the ring ran on dash_attn's ops
    check(per_rank, world_size, atol=1e-10, rtol=1e-10, dtype=torch.float64)


@multi_gpu
@pytest.mark.parametrize("world_size", sorted({2, torch.cuda.device_count()} if torch.cuda.is_available() else {2}))
def test_ring_nccl(world_size, tmp_path):
    per_rank = run_ring(world_size, "nccl", tmp_path)
    check(per_rank, world_size, atol=3e-2, rtol=3e-2, dtype=torch.bfloat16)
