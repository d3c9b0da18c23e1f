// One row of DASH_FWD_INSTANTIATIONS (fwd_instantiations_sm90.hpp).
#include "fwd_launch_template_sm90.cuh"

namespace dash_attn::sm90 {
template void run_forward_sm90<DType::kBF16, 256>(ForwardArgs const&, float, bool, int, cudaStream_t);
}  // namespace dash_attn::sm90
