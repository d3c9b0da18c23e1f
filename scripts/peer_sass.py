"""FlashAttention-4's sm90 kernels compiled on a machine without a GPU, for
reading their SASS beside ours (instruction counts per loop, where the waits
sit). Nothing here runs a kernel.

Needs a Python 3.12 environment with the peers' wheels (../shared/peers/fetch.sh
downloads them into .peers/dl) and torch (any build; CUDA need not work):

    python3.12 -m venv /tmp/fa4env
    /tmp/fa4env/bin/pip install --no-deps .peers/dl/*.whl
    /tmp/fa4env/bin/pip install torch einops numpy typing_extensions cuda-python
    /tmp/fa4env/bin/python scripts/peer_sass.py --pass bwd --hdim 64 --out /tmp/fa4_sass
    cuobjdump -sass /tmp/fa4_sass/bwd_h64_full/*bwd_sm90*.cubin

(cuobjdump comes with `pip install triton` on the system Python.) The CuTe DSL
keeps the PTX and cubin of every kernel it compiles in --out/<pass>_h<hdim>_<mask>/:
the forward's main kernel, or the backward's preprocess, main kernel and
postprocess. The backward is FA4's deterministic mode. Checked with
flash-attn-4 4.0.0b36 and nvidia-cutlass-dsl 4.8.1 (2026-12-04): the forward's
hdim 128 steady loop is 455 instructions, the backward's hdim 64 one 655.
"""
import argparse
import os
import sys


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pass", dest="which", choices=("fwd", "bwd"), required=True)
    parser.add_argument("--hdim", type=int, required=True)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--out", required=True, help="folder for the dumped PTX and cubin")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    dump = os.path.join(args.out, f"{args.which}_h{args.hdim}_{'causal' if args.causal else 'full'}")
    os.makedirs(dump, exist_ok=True)
    # Read when the DSL is imported: the target, what to keep and where.
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx,cubin", CUTE_DSL_DUMP_DIR=dump,
                      CUTE_DSL_NO_CACHE="1", FLASH_ATTENTION_ARCH="sm_90", FLASH_ATTENTION_NUM_SMS="132")
    import torch
    import cutlass.cute as cute
    from quack.compile_utils import make_fake_tensor
    from flash_attn.cute import interface

    # FA4's own fake mode compiles without launching and skips its CUDA-tensor checks.
    interface.is_fake_mode = lambda: True
    # Its stream comes from GPU tensors (TVM FFI); a plain fake stream compiles the same kernel.
    make_stream = cute.runtime.make_fake_stream
    cute.runtime.make_fake_stream = lambda *unused, **unused_kw: make_stream()

    # The backward turns torch tensors into CuTe tensors from DLPack, which
    # gives CPU tensors the generic address space, and TMA wants global
    # memory: symbolic global-memory tensors of the same rank and alignment
    # instead (as FA4's own fake-tensor compiles make them).
    def fake_cute_tensor(t, assumed_align=16, leading_dim=-1, fully_dynamic=False, enable_tvm_ffi=True):
        if t is None:
            return None
        dtype = interface.torch2cute_dtype_map[t.dtype]
        shape = tuple(cute.sym_int() for _ in t.shape)
        divisibility = max(assumed_align * 8 // dtype.width, 1)
        return make_fake_tensor(dtype, shape, divisibility=divisibility,
                                leading_dim=None if fully_dynamic else leading_dim)

    interface.to_cute_tensor = fake_cute_tensor

    # Shapes are symbolic in the compiled kernels; these only pick the kernel (batch, seqlen, heads).
    batch, seqlen, heads = 2, 4096, 16
    q, k, v, out, dout = (torch.empty(batch, seqlen, heads, args.hdim, dtype=torch.bfloat16) for _ in range(5))
    if args.which == "fwd":
        interface._flash_attn_fwd(q, k, v, causal=args.causal, _arch=90)
    else:
        lse = torch.empty(batch, heads, seqlen, dtype=torch.float32)
        interface._flash_attn_bwd(q, k, v, out, dout, lse, causal=args.causal, deterministic=True)
    for name in sorted(os.listdir(dump)):
        print(os.path.join(dump, name))


if __name__ == "__main__":
    main(sys.argv[1:])
