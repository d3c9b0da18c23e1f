// A problem shape with its mask: the parameter of the shape-sweeping tests,
// printed readably in test names and failure messages.
#pragma once

#include <ostream>

#include "dash_attn/types.hpp"

namespace dash_attn::testing {

struct MaskedShape {
  ProblemShape shape;
  bool causal;
};

inline void PrintTo(const MaskedShape& c, std::ostream* out) {
  const ProblemShape& s = c.shape;
  *out << (c.causal ? "causal" : "full") << " b" << s.batch << " q" << s.seqlen_q << " k" << s.seqlen_k << " h"
       << s.heads_q << "/" << s.heads_kv << " d" << s.head_dim;
}

}  // namespace dash_attn::testing
