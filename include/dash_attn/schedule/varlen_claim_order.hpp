// Host only: the claim order of a varlen batch as an array, built once per
// call (a kernel would read it from device memory; claim k takes entry k).
#pragma once

#include <algorithm>
#include <vector>

#include "dash_attn/schedule/varlen_problem.hpp"

namespace dash_attn::schedule {

enum class VarlenClaims {
  kLongestFirst,  // claims_before: the order the issue asks for
  kInOrder,       // sequence, q-head, KV tile ascending: the baseline it is measured against
};

// Every (sequence, q-head, KV tile) chain once, sequence-major.
inline std::vector<VarlenChain> varlen_chains(const VarlenProblem& p) {
  std::vector<VarlenChain> chains;
  for (int s = 0; s < p.batch; ++s) {
    const int kv_tiles = p.head_tiles(s).kv_tiles();
    for (int h = 0; h < p.heads_q; ++h)
      for (int kv = 0; kv < kv_tiles; ++kv) chains.push_back(VarlenChain{s, h, kv});
  }
  return chains;
}

// In-order is live too: a wait targets a lower kv or a lower head of the
// same sequence, both earlier in sequence-major order.
inline std::vector<VarlenChain> varlen_claim_order(const VarlenProblem& p, VarlenClaims claims) {
  std::vector<VarlenChain> chains = varlen_chains(p);
  if (claims == VarlenClaims::kLongestFirst)
    std::sort(chains.begin(), chains.end(),
              [&](const VarlenChain& a, const VarlenChain& b) { return claims_before(p, a, b); });
  return chains;
}

}  // namespace dash_attn::schedule
