// A variable-length batch as a schedule over ragged work (issue 17, point 2).
// Plain data and DASH_HOST_DEVICE arithmetic, so a kernel can read it as the
// model does; the claim order itself is sorted on the host
// (varlen_claim_order.hpp) and handed to the kernel as an array.
//
// The work: one chain per (sequence, q-head, KV tile), visiting the Q tiles of
// its own sequence that the mask leaves. Each sequence has its own HeadTiles
// (its seqlen_q, seqlen_k, the batch's tile sizes and mask); a sequence of
// length 0 has no Q tiles (its chains are empty: dK/dV are still written, as
// zeros) or no KV tiles (no chains at all).
//
// Determinism across packings: the Q-tile order of a chain and the rank of
// every dQ add are DescendingSchedule's rule applied to the sequence's own
// HeadTiles, and nothing else: no batch index, no packing offset, no other
// sequence's length enters. So a sequence's dQ bits are the same whatever
// batch it is packed into. (Descending is also what resolve_schedule gives
// every varlen batch under kAuto, for the same reason.)
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/descending_schedule.hpp"
#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/tile_problem.hpp"

namespace dash_attn::schedule {

// One chain of a varlen batch: KV tile `kv` of q-head `head_q` of `sequence`.
struct VarlenChain {
  int sequence = 0;
  int head_q = 0;
  int kv = 0;
};

// A varlen batch is a TileProblem with cu_seqlens (batch = sequences;
// tile_problem.hpp has the lengths and per-sequence HeadTiles); this adds the
// chain queries of the longest-first order.
struct VarlenProblem : TileProblem {
  DASH_HOST_DEVICE int chains_of_sequence(int s) const { return heads_q * head_tiles(s).kv_tiles(); }

  DASH_HOST_DEVICE int chain_length(const VarlenChain& c) const { return head_tiles(c.sequence).chain_length(c.kv); }

  // The claim key: Q tiles from the chain's first one to the last Q tile,
  // q_tiles - q_begin(kv). Without a left bound that is chain_length; with
  // one, chain_length is no longer monotone in kv (the first chains of a
  // band are cut by the sequence start), but this key still does not
  // increase with kv, which is what keeps claims_before live.
  DASH_HOST_DEVICE int claim_length(const VarlenChain& c) const {
    const HeadTiles t = head_tiles(c.sequence);
    return t.q_tiles() - t.q_begin(c.kv);
  }

  // Step `step` of a chain visits this Q tile of its sequence (last Q tile first).
  DASH_HOST_DEVICE int q_tile(const VarlenChain& c, int step) const {
    return DescendingSchedule::q_tile(head_tiles(c.sequence), c.kv, step);
  }

  // Position of KV tile kv's add into dQ tile q of its (sequence, head):
  // ascending KV. A function of the sequence's own geometry only.
  DASH_HOST_DEVICE static int dq_rank(const HeadTiles& own_sequence, int kv, int q) {
    return DescendingSchedule::rank(own_sequence, kv, q);
  }
  DASH_HOST_DEVICE int dq_rank(const VarlenChain& c, int q) const { return dq_rank(head_tiles(c.sequence), c.kv, q); }

  // Position of a q-head's dK/dV add within its GQA group: ascending q-head.
  DASH_HOST_DEVICE int dkv_rank(const VarlenChain& c) const { return c.head_q % group_size(); }
};

// Longest-first claim order: does chain a go before chain b? Longer chains
// first, so that one long sequence among many short ones starts at once
// instead of trailing the batch (LPT; the key is claim_length, the chain's
// length when there is no sliding window). Ties go by sequence, then KV tile,
// then q-head, ascending, for three reasons:
//  - liveness for any grid: every wait must target an earlier claim. A dQ add
//    of (s, h, kv) waits for (s, h, kv - 1), whose claim key is at least as
//    large (q_begin does not decrease with kv), so it is claimed earlier, on a tie
//    because of the ascending kv. A dK/dV add of (s, h, kv) waits for the
//    lower q-heads of its GQA group at the same (s, kv): same length, lower
//    head, so earlier too;
//  - KV before head deals equal chains head by head (kv 0 of every head, then
//    kv 1, ...), so a wave of CTAs does not hold one head's chains, which
//    would wait on each other's dQ adds (the reason for kChainClaimInterleave;
//    head before KV was 7-12% slower in the model on full masks, where a
//    sequence's chains all tie);
//  - the order is a total one, so it does not depend on the sort algorithm.
// The claim order changes only timing, never a rank, hence never the bits.
DASH_HOST_DEVICE inline bool claims_before(const VarlenProblem& p, const VarlenChain& a, const VarlenChain& b) {
  const int la = p.claim_length(a), lb = p.claim_length(b);
  if (la != lb) return la > lb;
  if (a.sequence != b.sequence) return a.sequence < b.sequence;
  if (a.kv != b.kv) return a.kv < b.kv;
  return a.head_q < b.head_q;
}

// The kernel's claim order over a varlen batch: whole sequences, longest
// first (more query rows, so longer chains; then more keys, so more chains;
// then the lower index), each run of sequences with the same lengths (adjacent
// in this order) dealt like an equal-length batch of that many sequences
// (Schedule::work_item_of_run: heads interleaved across the run's sequences).
// Coarser than claims_before, which interleaves the chains of different
// lengths, but it sorts `batch` keys on the device (bwd_preprocess_sm90.cu
// ranks each sequence against the others) instead of every chain. Live for
// any grid like claims_before: a sequence's items keep their relative order
// and every wait targets an earlier item of the same sequence. A total order,
// so the permutation depends on the lengths alone. The key is split out so
// that a kernel can read every sequence's lengths once (into shared memory)
// and compare keys.
struct SequenceClaimKey {
  int seqlen_q = 0;
  int seqlen_k = 0;
};

DASH_HOST_DEVICE inline SequenceClaimKey sequence_claim_key(const TileProblem& p, int s) {
  return SequenceClaimKey{p.seqlen_q_of(s), p.seqlen_k_of(s)};
}

// Whether the keys' sequences form one run: the same lengths, hence the
// same HeadTiles and the same items.
DASH_HOST_DEVICE inline bool same_claim_run(SequenceClaimKey ka, SequenceClaimKey kb) {
  return ka.seqlen_q == kb.seqlen_q && ka.seqlen_k == kb.seqlen_k;
}

// Whether sequence a's run goes before sequence b's (the lengths alone).
DASH_HOST_DEVICE inline bool run_claims_before(SequenceClaimKey ka, SequenceClaimKey kb) {
  if (ka.seqlen_q != kb.seqlen_q) return ka.seqlen_q > kb.seqlen_q;
  return ka.seqlen_k > kb.seqlen_k;
}

// Whether sequence a (key ka) is claimed before sequence b (key kb).
DASH_HOST_DEVICE inline bool sequence_claims_before(SequenceClaimKey ka, int a, SequenceClaimKey kb, int b) {
  if (!same_claim_run(ka, kb)) return run_claims_before(ka, kb);
  return a < b;
}

DASH_HOST_DEVICE inline bool sequence_claims_before(const TileProblem& p, int a, int b) {
  return sequence_claims_before(sequence_claim_key(p, a), a, sequence_claim_key(p, b), b);
}

}  // namespace dash_attn::schedule
