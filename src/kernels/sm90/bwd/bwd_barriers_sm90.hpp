// The backward's named barrier IDs (sync_sm90.hpp has the primitives).
#pragma once

#include <cstdint>

namespace dash_attn::sm90::bwd {

// Hardware named barriers (0 is __syncthreads). The kernel owns IDs 1..15: no
// CUTLASS component that reserves named barriers is used.
enum class BwdBarrier : uint32_t {
  kDsReady = 1,     // both MMA warpgroups wrote their dS columns to shared memory
  kDqFull0 = 2,     // MMA warpgroups -> dQ writer: partial dQ tile in stage 0 ready
  kDqFull1 = 3,
  kQStageRead = 4,  // kDqInQStage: both MMA warpgroups' GEMMs have read a Q/dO stage, dQ may overwrite it
  kEpilogue = 6,    // MMA warpgroups only: ordered dK/dV accumulation
  kDqEmpty = 7,     // dQ writer -> one MMA warpgroup: a stage read by the bulk engine;
                    // 7 + 2 * stage + warpgroup (7..10), one per warpgroup so neither waits for the other
};

// The dQ stage's "read by the bulk engine" barrier of one MMA warpgroup:
// that warpgroup (128 threads) and the stage's dQ writer warp (32) meet there.
__device__ __forceinline__ constexpr uint32_t dq_empty_barrier(int stage, int warpgroup) {
  return static_cast<uint32_t>(BwdBarrier::kDqEmpty) + 2 * stage + warpgroup;
}
constexpr uint32_t kDqEmptyBarrierThreads = 128 + 32;

}  // namespace dash_attn::sm90::bwd
