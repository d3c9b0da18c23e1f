// Index of element (b, s, h, d) in a dense row-major (batch, seq, head, dim) tensor.
#pragma once

#include <cstdint>

namespace dash_attn::reference {

struct DenseLayout {
  int64_t seqlen, heads, dim;
  int64_t operator()(int64_t b, int64_t s, int64_t h, int64_t d) const { return ((b * seqlen + s) * heads + h) * dim + d; }
};

}  // namespace dash_attn::reference
