// A varlen batch as a ScheduleTrace, so the existing event simulation
// (simulate.hpp) and critical path run it unchanged: the chains come from
// schedule::VarlenProblem in the claim order asked for, each chain's steps
// and ranks from the same header the kernel would compile.
#pragma once

#include <utility>
#include <vector>

#include "dash_attn/schedule/varlen_claim_order.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::model {

// Owns the cu_seqlens arrays a VarlenProblem points into; get() re-binds
// the pointers, so copies stay valid.
class VarlenBatch {
 public:
  // lengths: per sequence (seqlen_q, seqlen_k), either may be 0.
  VarlenBatch(const std::vector<std::pair<int, int>>& lengths, int heads_q, int heads_kv, int block_m, int block_n,
              bool causal, int offset_q = 0, int offset_k = 0, int window_left = -1, int window_right = -1);
  schedule::VarlenProblem get() const;

 private:
  schedule::VarlenProblem p_;
  std::vector<int> cu_q_, cu_k_;
};

// One chain per item, in claim order. dQ and dK/dV tile ids are
// sequence-major (then head, then tile), as build_trace numbers them.
ScheduleTrace build_varlen_trace(const schedule::VarlenProblem& p, schedule::VarlenClaims claims);

}  // namespace dash_attn::model
