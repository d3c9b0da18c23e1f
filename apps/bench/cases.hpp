// The problems dash-bench runs: one case per (shape, mask), each with its
// input seed, FLOP count and the reduced problem --verify checks it on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::bench {

struct BenchCase {
  ProblemShape shape;
  bool causal = false;
  ScoreMods mods;  // the run's --window / --softcap
  int q_heads_per_chain = 0;  // the run's --q-heads-per-chain (0: the library's choice)
};

// The case's mask and mods as dash_attn's Options (schedule and
// determinism left at their defaults).
Options case_options(const BenchCase& c);

// "full" or "causal", then " window L,R" and " softcap X" when given: a row's mask column.
std::string mask_text(const BenchCase& c);

// Grid order: head_dim, then mask, then seqlen; --shape: shape, then mask.
std::vector<BenchCase> bench_cases(const BenchOptions& options);

// Inputs depend on the case alone (not on what ran before), so a repro line
// regenerates the same data: 1000 + seqlen_q + head_dim + causal.
uint64_t case_seed(const BenchCase& c);

// 4 * batch * heads_q * seqlen_q * seqlen_k * head_dim, half for causal; the
// backward counts 2.5 times this (FA2/FA3/DASH convention). With a window,
// the full count times the fraction of (row, key) pairs the band leaves
// visible, counted row by row (what FA4's and bench/peers.py's windowed
// TFLOPS count).
double forward_flops(const ProblemShape& shape, bool causal);
double forward_flops(const BenchCase& c);

// What --verify checks a large row on: batch 2, at most 2 KV heads with the
// case's GQA group, both seqlens scaled down together so the larger one is
// kVerifySeqlen (the fp64 reference costs O(seqlen^2 * head_dim) per head on
// one core: about a second per head at 1024, hdim 128). Shapes already that
// small are returned unchanged.
inline constexpr int kVerifySeqlen = 1024;
ProblemShape reduced_shape(const ProblemShape& shape);

// Whether the row is checked on a slice of the timed problem itself.
bool slice_checked(const BenchOptions& options, const ProblemShape& shape);

}  // namespace dash_attn::bench
