// The compiled forward kernels: the one table of (dtype, head_dim). Each row
// has its own translation unit fwd_<dtype>_hdim<d>_sm90.cu (one FA3-class
// kernel per file keeps a parallel build balanced); fwd_launch_sm90.cu
// dispatches over the same table. The mask is a runtime argument: it only
// changes which key tiles are visited and which of them are masked.
#pragma once

#include "dash_attn/types.hpp"

typedef struct CUstream_st* cudaStream_t;

#define DASH_FWD_INSTANTIATIONS(X) \
  X(kBF16, 64)                     \
  X(kBF16, 128)                    \
  X(kBF16, 256)                    \
  X(kFP16, 64)                     \
  X(kFP16, 128)                    \
  X(kFP16, 256)

namespace dash_attn::sm90 {

// The tile-claim counter of the forward kernels for the current device and
// `stream` (fwd_launch_sm90.cu); null when none can be made now.
int* forward_tile_counter(cudaStream_t stream);

template <DType kDType, int kHeadDim>
void run_forward_sm90(ForwardArgs const& args, float softmax_scale, bool causal, int sm_count, cudaStream_t stream);

#define DASH_FWD_DECLARE(kDType, kHeadDim) \
  extern template void run_forward_sm90<DType::kDType, kHeadDim>(ForwardArgs const&, float, bool, int, cudaStream_t);
DASH_FWD_INSTANTIATIONS(DASH_FWD_DECLARE)
#undef DASH_FWD_DECLARE

}  // namespace dash_attn::sm90
