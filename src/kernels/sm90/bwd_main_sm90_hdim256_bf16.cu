// Backward main kernel, head_dim 256, bf16.
#include "bwd_launch_sm90.hpp"

DASH_INSTANTIATE_BACKWARD_MAIN(dash_attn::DType::kBF16, cutlass::bfloat16_t, 256)
