// Stage and phase of a ring of mbarrier-guarded shared-memory buffers.
#pragma once

#include <cstdint>

namespace dash_attn::sm90::bwd {

// The producer and the consumers of a ring advance identical copies.
template <int kStages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
};

}  // namespace dash_attn::sm90::bwd
