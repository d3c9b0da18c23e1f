// Host only: the claim order of a varlen batch as an array, built once per
// call (a kernel would read it from device memory; claim k takes entry k).
#pragma once

#include <algorithm>
#include <vector>

#include "dash_attn/schedule/schedule.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"

namespace dash_attn::schedule {

enum class VarlenClaims {
  kLongestFirst,          // claims_before: chains longest first across sequences
  kLongestSequenceFirst,  // sequence_claims_before + Schedule's items: the kernel's order
  kInOrder,               // sequence, q-head, KV tile ascending: the baseline both are measured against
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
  if (claims == VarlenClaims::kLongestSequenceFirst) {
    std::vector<int> sequences(p.batch);
    for (int s = 0; s < p.batch; ++s) sequences[s] = s;
    std::sort(sequences.begin(), sequences.end(), [&](int a, int b) { return sequence_claims_before(p, a, b); });
    // The kernel decodes descending's items (one chain each) with heads
    // interleaved across each run of equal-length sequences.
    const Schedule schedule(ScheduleKind::kDescending, p);
    std::vector<VarlenChain> chains;
    for (std::size_t first = 0; first < sequences.size();) {
      const int leader = sequences[first];
      std::size_t end = first + 1;
      while (end < sequences.size() &&
             same_claim_run(sequence_claim_key(p, leader), sequence_claim_key(p, sequences[end])))
        ++end;
      const int run = static_cast<int>(end - first);
      for (int k = 0; k < run * schedule.items_of_sequence(p, leader); ++k) {
        const WorkItem item = schedule.work_item_of_run(p, p.head_tiles(leader), run, k);
        chains.push_back(VarlenChain{sequences[first + item.batch], item.head_q, item.kv[0]});
      }
      first = end;
    }
    return chains;
  }
  std::vector<VarlenChain> chains = varlen_chains(p);
  if (claims == VarlenClaims::kLongestFirst)
    std::sort(chains.begin(), chains.end(),
              [&](const VarlenChain& a, const VarlenChain& b) { return claims_before(p, a, b); });
  return chains;
}

}  // namespace dash_attn::schedule
