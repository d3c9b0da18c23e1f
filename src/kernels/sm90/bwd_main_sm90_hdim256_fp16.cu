// Backward main kernel, head_dim 256, fp16.
#include "bwd_launch_sm90.hpp"

DASH_INSTANTIATE_BACKWARD_MAIN(dash_attn::DType::kFP16, cutlass::half_t, 256)
