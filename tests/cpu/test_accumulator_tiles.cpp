// The backward workspace's slots (plan/accumulator_tiles.hpp) and the varlen
// claim order of the sequences (schedule::sequence_claims_before): what the
// kernels rely on without checking it on the device.
//  - ascending cu_seqlens: no two (sequence, head, tile) share a slot, and
//    every slot lies inside the workspace the host sized from the totals;
//  - any arrays at all (decreasing, past the tensor, seqused): every slot
//    still lies inside the workspace (wrong values, never a bad access);
//  - equal lengths: the (batch, head)-major layout the kernels had before;
//  - the sequence ranks of the preprocess form a permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "dash_attn/plan/accumulator_tiles.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"

namespace dash_attn::testing {
namespace {

struct Batch {
  std::vector<int> cu_q, cu_k;
  schedule::TileProblem problem;
  plan::AccumulatorTiles slots;
};

// A TileProblem over the arrays as the backward builds it (host::backward_varlen_tile_problem).
Batch make_batch(std::vector<int> cu_q, std::vector<int> cu_k, int total_q, int total_k, int heads_q, int heads_kv,
                 int block_m, int block_n) {
  Batch b{std::move(cu_q), std::move(cu_k), {}, {}};
  schedule::TileProblem& p = b.problem;
  p.batch = static_cast<int>(b.cu_q.size()) - 1;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.block_m = block_m;
  p.block_n = block_n;
  p.cu_seqlens_q = b.cu_q.data();
  p.cu_seqlens_k = b.cu_k.data();
  p.total_q = total_q;
  p.total_k = total_k;
  p.max_seqlen_q = total_q;
  p.max_seqlen_k = total_k;
  b.slots = plan::AccumulatorTiles{plan::AccumulatorTiles::varlen_slots(total_q, p.batch, block_m),
                                   plan::AccumulatorTiles::varlen_slots(total_k, p.batch, block_n)};
  return b;
}

// Every slot the kernels touch; `distinct` also requires that none repeats.
void check_slots(const Batch& b, bool distinct) {
  const schedule::TileProblem& p = b.problem;
  std::set<int64_t> q_seen, kv_seen;
  for (int s = 0; s < p.batch; ++s) {
    const schedule::HeadTiles t = p.head_tiles(s);
    for (int h = 0; h < p.heads_q; ++h)
      for (int q = 0; q < t.q_tiles(); ++q) {
        const int64_t slot = b.slots.first_q_tile(p, s, h) + q;
        ASSERT_GE(slot, 0);
        ASSERT_LT(slot, int64_t{p.heads_q} * b.slots.q_per_head) << "sequence " << s << " head " << h << " tile " << q;
        if (distinct) ASSERT_TRUE(q_seen.insert(slot).second) << "sequence " << s << " head " << h << " tile " << q;
      }
    for (int h = 0; h < p.heads_kv; ++h)
      for (int kv = 0; kv < t.kv_tiles(); ++kv) {
        const int64_t slot = b.slots.first_kv_tile(p, s, h) + kv;
        ASSERT_GE(slot, 0);
        ASSERT_LT(slot, int64_t{p.heads_kv} * b.slots.kv_per_head);
        if (distinct) ASSERT_TRUE(kv_seen.insert(slot).second) << "sequence " << s << " kv head " << h;
      }
  }
}

std::vector<int> prefix(const std::vector<int>& lengths, int start) {
  std::vector<int> cu{start};
  for (int l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

TEST(AccumulatorTiles, AscendingSequencesNeverShareASlot) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 12);
    const int block_m = trial % 2 ? 64 : 128, block_n = trial % 3 ? 128 : 64;
    std::vector<int> lq, lk;
    for (int s = 0; s < batch; ++s) {
      // Lengths around tile sizes, including 0 and 1.
      const int pick[] = {0, 1, block_m - 1, block_m, block_m + 1, 2 * block_m + 7, static_cast<int>(rng() % 700)};
      lq.push_back(pick[rng() % 7]);
      lk.push_back(pick[rng() % 7]);
    }
    const int lead_q = static_cast<int>(rng() % 100), lead_k = static_cast<int>(rng() % 100);
    std::vector<int> cu_q = prefix(lq, lead_q), cu_k = prefix(lk, lead_k);
    const int total_q = std::max(1, cu_q.back() + static_cast<int>(rng() % 50));
    const int total_k = std::max(1, cu_k.back() + static_cast<int>(rng() % 50));
    const Batch b = make_batch(cu_q, cu_k, total_q, total_k, 4, 2, block_m, block_n);
    check_slots(b, true);
  }
}

TEST(AccumulatorTiles, AnyArraysStayInsideTheWorkspace) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 10);
    const int total_q = 1 + static_cast<int>(rng() % 900), total_k = 1 + static_cast<int>(rng() % 900);
    std::vector<int> cu_q, cu_k;
    for (int s = 0; s <= batch; ++s) {
      cu_q.push_back(static_cast<int>(rng() % 2400) - 600);  // negative, decreasing, past the tensor
      cu_k.push_back(static_cast<int>(rng() % 2400) - 600);
    }
    check_slots(make_batch(cu_q, cu_k, total_q, total_k, 3, 1, 64, 128), false);
  }
}

TEST(AccumulatorTiles, EqualLengthsKeepTheBatchHeadMajorLayout) {
  schedule::TileProblem p{2, 8, 2, 64, 128, true, 300, 500};
  const plan::AccumulatorTiles slots{(300 + 63) / 64, (500 + 127) / 128};
  for (int b = 0; b < 2; ++b) {
    for (int h = 0; h < 8; ++h) EXPECT_EQ(slots.first_q_tile(p, b, h), (b * 8 + h) * 5);
    for (int h = 0; h < 2; ++h) EXPECT_EQ(slots.first_kv_tile(p, b, h), (b * 2 + h) * 4);
  }
}

TEST(SequenceOrder, RanksFormAPermutationLongestFirst) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 40);
    std::vector<int> lengths;
    for (int s = 0; s < batch; ++s) lengths.push_back(static_cast<int>(rng() % 5) * 64 + static_cast<int>(rng() % 3));
    const std::vector<int> cu = prefix(lengths, 0);
    const Batch b = make_batch(cu, cu, std::max(1, cu.back()), std::max(1, cu.back()), 4, 4, 64, 128);
    // What the preprocess computes: each sequence's rank among the others.
    std::vector<int> order(batch, -1);
    for (int s = 0; s < batch; ++s) {
      int position = 0;
      for (int t = 0; t < batch; ++t) position += schedule::sequence_claims_before(b.problem, t, s) ? 1 : 0;
      ASSERT_EQ(order[position], -1) << "two sequences at position " << position;
      order[position] = s;
    }
    for (int i = 1; i < batch; ++i) {
      const schedule::HeadTiles before = b.problem.head_tiles(order[i - 1]), after = b.problem.head_tiles(order[i]);
      EXPECT_GE(before.q_tiles(), after.q_tiles());
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
