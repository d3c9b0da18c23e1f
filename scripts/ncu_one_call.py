"""One attention call of one implementation between torch.cuda.profiler.start()
and stop(), after warm-up calls, for `ncu --profile-from-start off`
(docs/gpu_workflow.md, "ncu beside a peer"): the profile then holds that
call's kernels only (no JIT compilation, no warm-up, no other implementation).
  ncu --profile-from-start off --set full -o REP \\
      python3 scripts/ncu_one_call.py --impl fa4 --deterministic --pass bwd --hdim 64 ...
Implementations are bench/attention_impls.py's (dash_attn, fa4, cudnn, ...).
--varlen (dash_attn only) packs the same tokens as one varlen batch of equal
lengths (cu_seqlens every --seqlen rows), the case of issue 17's equal-length
bar, so the two profiles compare kernel for kernel."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import attention_impls  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", default=attention_impls.DASH)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--pass", dest="which", choices=("fwd", "bwd"), default="bwd")
    parser.add_argument("--hdim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seqlen", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=None)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--varlen", action="store_true")
    args = parser.parse_args()

    impl = attention_impls.make(args.impl)
    why = impl.unavailable()
    if why:
        sys.exit(f"{args.impl}: {why}")
    if impl.protocol != "autograd":
        sys.exit(f"{args.impl}: timed through direct op calls ({impl.protocol}); only autograd implementations here")
    torch.manual_seed(0)
    shape_q = (args.batch, args.seqlen, args.heads, args.hdim)
    shape_kv = (args.batch, args.seqlen, args.heads_kv or args.heads, args.hdim)
    q = torch.randn(shape_q, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(shape_kv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(shape_kv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(shape_q, device="cuda", dtype=torch.bfloat16)
    attn = impl.function(args.causal, args.deterministic)
    if args.varlen:
        attn = varlen_function(args)

    def call():
        out = attention_impls.first_output(attn(q, k, v))
        if args.which == "bwd":
            torch.autograd.grad(out, (q, k, v), dout)

    with impl.mode(args.deterministic):
        for _ in range(max(args.warmup, impl.min_warmup)):
            call()
        if args.which == "bwd":
            out = attention_impls.first_output(attn(q, k, v))
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            torch.autograd.grad(out, (q, k, v), dout)
        else:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            attn(q, k, v)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def varlen_function(args):
    """attn(q, k, v) over the same (batch, seqlen) tensors through
    flash_attn_varlen_func, the batch packed at equal lengths."""
    if args.impl != attention_impls.DASH:
        sys.exit("--varlen: dash_attn only")
    import dash_attn

    ends = torch.arange(0, args.batch + 1, device="cuda", dtype=torch.int32) * args.seqlen
    schedule = "auto" if args.deterministic else "atomic"

    def attn(q, k, v):
        packed = [t.flatten(0, 1) for t in (q, k, v)]
        out = dash_attn.flash_attn_varlen_func(*packed, ends, ends, args.seqlen, args.seqlen, causal=args.causal,
                                               deterministic=args.deterministic, schedule=schedule)
        return out.view(q.shape)
    return attn


if __name__ == "__main__":
    main()
