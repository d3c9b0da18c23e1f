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
};

}  // namespace dash_attn::model
