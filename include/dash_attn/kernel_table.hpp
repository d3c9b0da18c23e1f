// The one table of the library's kernels: (pass, dtype, head_dim, mods), one row
// per compiled instantiation. cmake/kernel_table.cmake reads these rows to
// write one translation unit per row (src/kernels/sm90/instances/*.cu.in),
// trimmed by -DDASH_KERNELS, and records the rows it built in the generated
// header dash_attn/compiled_kernels.hpp (DASH_COMPILED_KERNELS, same shape).
// The validation (C++, and Python through dash_compiled_kernels() of the C
// ABI), the dispatch and the tests read those. Adding a head dim is a row per
// (pass, dtype, mods) here plus its tiles in tile_config.hpp, and a compile.
#pragma once

#include "dash_attn/host_device.hpp"

// X(pass, dtype, head_dim, mods): pass is Forward or Backward, dtype BF16 or
// FP16; mods Plain (no mask but causal, no softcap: the kernels as tuned and
// measured) or ScoreMods (sliding windows and softcap on top, compiled apart
// so that Plain keeps its code: reading the window at run time cost the
// backward's hdim 128 kernel 228 B more spills, head_tiles.hpp). Both take
// sinks (the forward's epilogue adds them; the backward sees them in the LSE).
#define DASH_KERNEL_TABLE(X) \
  X(Forward, BF16, 64, Plain)       \
  X(Forward, BF16, 128, Plain)      \
  X(Forward, BF16, 256, Plain)      \
  X(Forward, FP16, 64, Plain)       \
  X(Forward, FP16, 128, Plain)      \
  X(Forward, FP16, 256, Plain)      \
  X(Forward, BF16, 64, ScoreMods)   \
  X(Forward, BF16, 128, ScoreMods)  \
  X(Forward, BF16, 256, ScoreMods)  \
  X(Forward, FP16, 64, ScoreMods)   \
  X(Forward, FP16, 128, ScoreMods)  \
  X(Forward, FP16, 256, ScoreMods)  \
  X(Backward, BF16, 64, Plain)      \
  X(Backward, BF16, 128, Plain)     \
  X(Backward, BF16, 256, Plain)     \
  X(Backward, FP16, 64, Plain)      \
  X(Backward, FP16, 128, Plain)     \
  X(Backward, FP16, 256, Plain)     \
  X(Backward, BF16, 64, ScoreMods)  \
  X(Backward, BF16, 128, ScoreMods) \
  X(Backward, BF16, 256, ScoreMods) \
  X(Backward, FP16, 64, ScoreMods)  \
  X(Backward, FP16, 128, ScoreMods) \
  X(Backward, FP16, 256, ScoreMods)

namespace dash_attn {

enum class Pass { kForward, kBackward };

// A head dim some row of the table has (the shapes the library can ever serve;
// whether this build compiled it is the dispatch's question).
DASH_HOST_DEVICE constexpr bool is_supported_head_dim(long long head_dim) {
#define DASH_TABLE_HAS_HEAD_DIM(row_pass, row_dtype, row_head_dim, row_mods) || head_dim == row_head_dim
  return false DASH_KERNEL_TABLE(DASH_TABLE_HAS_HEAD_DIM);
#undef DASH_TABLE_HAS_HEAD_DIM
}

}  // namespace dash_attn
