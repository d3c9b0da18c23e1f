// Problems for the schedule and model tests: random real shapes (odd and
// unequal lengths, seqlen 1, GQA, varlen with empty sequences, block_m !=
// block_n both ways) that own their cu_seqlens arrays.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::testing {

class OwnedProblem {
 public:
  OwnedProblem(schedule::TileProblem p, std::vector<int> seqlens_q = {}, std::vector<int> seqlens_k = {}) : p_(p) {
    if (!seqlens_q.empty()) {
      cu_q_.push_back(0);
      cu_k_.push_back(0);
      for (std::size_t b = 0; b < seqlens_q.size(); ++b) {
        cu_q_.push_back(cu_q_.back() + seqlens_q[b]);
        cu_k_.push_back(cu_k_.back() + seqlens_k[b]);
      }
      p_.batch = static_cast<int>(seqlens_q.size());
    }
  }
  // The pointers are re-bound on every call, so copies of OwnedProblem stay valid.
  schedule::TileProblem get() const {
    schedule::TileProblem p = p_;
    p.cu_seqlens_q = cu_q_.empty() ? nullptr : cu_q_.data();
    p.cu_seqlens_k = cu_k_.empty() ? nullptr : cu_k_.data();
    return p;
  }
  std::string describe() const {
    const schedule::TileProblem p = get();
    std::string s = "batch " + std::to_string(p.batch) + " heads " + std::to_string(p.heads_q) + "/" +
                    std::to_string(p.heads_kv) + " tile " + std::to_string(p.block_m) + "x" + std::to_string(p.block_n) +
                    (p.causal ? " causal" : " full") + " seqlens";
    for (int b = 0; b < p.batch; ++b) s += " " + std::to_string(p.seqlen_q_of(b)) + ":" + std::to_string(p.seqlen_k_of(b));
    return s;
  }

 private:
  schedule::TileProblem p_;
  std::vector<int> cu_q_, cu_k_;
};

inline std::vector<OwnedProblem> random_problems(unsigned seed, int count, int max_seqlen = 700) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr int kTiles[][2] = {{64, 128}, {128, 128}, {64, 64}, {128, 64}, {48, 32}, {16, 16}};
  std::vector<OwnedProblem> problems;
  for (int i = 0; i < count; ++i) {
    schedule::TileProblem p;
    const auto& tile = kTiles[pick(0, 5)];
    p.block_m = tile[0];
    p.block_n = tile[1];
    p.heads_kv = pick(1, 2);
    p.heads_q = p.heads_kv * pick(1, 3);
    p.causal = pick(0, 1) == 1;
    auto length = [&] {
      const int kind = pick(0, 4);
      return kind == 0 ? 1 : kind == 1 ? pick(1, 4) * p.block_n : pick(1, max_seqlen);
    };
    if (pick(0, 3) == 0) {  // varlen, possibly with an empty sequence
      const int batch = pick(1, 3);
      std::vector<int> sq, sk;
      for (int b = 0; b < batch; ++b) {
        sq.push_back(pick(0, 6) == 0 ? 0 : length());
        sk.push_back(pick(0, 1) ? sq.back() : length());
      }
      problems.emplace_back(p, sq, sk);
    } else {
      p.batch = pick(1, 2);
      p.seqlen_q = length();
      p.seqlen_k = pick(0, 1) ? p.seqlen_q : length();
      problems.emplace_back(p);
    }
  }
  return problems;
}

// Mostly small problems plus a few long enough (up to ~375 KV tiles of 16)
// that a head splits into several waves.
inline std::vector<OwnedProblem> mixed_problems(unsigned seed) {
  std::vector<OwnedProblem> problems = random_problems(seed, 300);
  for (OwnedProblem& p : random_problems(seed + 1000, 40, 6000)) problems.push_back(p);
  return problems;
}

inline constexpr ScheduleKind kAllKinds[] = {ScheduleKind::kAtomic,         ScheduleKind::kFA3,
                                              ScheduleKind::kDescending,     ScheduleKind::kShift,
                                              ScheduleKind::kSymmetricShift, ScheduleKind::kAuto};

inline constexpr ScheduleKind kOrderedKinds[] = {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift,
                                                  ScheduleKind::kSymmetricShift};

}  // namespace dash_attn::testing
