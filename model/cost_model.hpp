// Costs of the phases of the backward, in any time unit (the CLI uses the
// unit of c). SCHEDULES.md lists what was measured on the H200: r and s are
// 10-50% of c, not zero as in the paper's model.
#pragma once

namespace dash_attn::model {

struct CostModel {
  double compute = 1.0;         // c: one step on a tile the mask leaves whole
  double compute_masked = 1.0;  // c_masked: a step that applies the mask (diagonal, ragged end)
  double reduce = 0.5;          // r: one dQ tile add, including its completion wait
  double handoff = 0.0;         // s: a counter release seen by another worker
  double prologue = 0.0;        // per chain: K, V loaded before its first step
  double epilogue = 0.0;        // per chain: dK, dV written after its last step
  double reduce_dkv = 0.0;      // GQA: one ordered dK + dV add into the group's accumulator
  // false: the paper's model, a worker adds its dQ tile before computing the
  // next one. true: a writer warp adds while the next tile computes (FA3's
  // dQ writer); with one shared-memory buffer a compute can only hand over
  // its tile once the previous add completed.
  bool overlap_reduce = false;
  // Overlapped mode only. dq_writers: shared-memory dQ stages, each drained by
  // its own writer (tile j of a worker goes to stage j mod dq_writers and waits
  // until that stage's previous add is done); the kernel has kBackwardDqStages (one writer warp
  // per stage). drain_between_chains: a chain starts only after every writer
  // finished (the kernel's CTA barrier between chains before 9591e68; today's
  // kernel has none: kBackwardDrainsBetweenChains in tile_config.hpp).
  int dq_writers = 1;
  bool drain_between_chains = false;

  // What the simulator and the critical path both apply: serial mode has one
  // writer and always waits for it; at most kMaxDqWriters stages.
  static constexpr int kMaxDqWriters = 4;
  int writers() const {
    if (!overlap_reduce || dq_writers < 1) return 1;
    return dq_writers < kMaxDqWriters ? dq_writers : kMaxDqWriters;
  }
  bool drains_between_chains() const { return !overlap_reduce || drain_between_chains; }
};

}  // namespace dash_attn::model
