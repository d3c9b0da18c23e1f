// The one dispatch point of the forward pass: (dtype, head_dim) -> the
// compiled kernel of DASH_FWD_INSTANTIATIONS.
#include <string>

#include "fwd_instantiations_sm90.hpp"
#include "launch.hpp"

namespace dash_attn::sm90 {

void launch_forward(const ForwardArgs& args, float softmax_scale, bool causal, cudaStream_t stream) {
  // The row maximum is taken on raw scores and scaled afterwards, which is
  // only the maximum of the scaled scores when the scale is positive.
  if (!(softmax_scale > 0.0f))
    throw Error(ErrorCode::kNotSupported, "forward: the sm90 kernel needs a positive softmax_scale, got " +
                                              std::to_string(softmax_scale));
#define DASH_FWD_DISPATCH(kDType, kHeadDim)                                  \
  if (args.dtype == DType::kDType && args.shape.head_dim == kHeadDim) {         \
    run_forward_sm90<DType::kDType, kHeadDim>(args, softmax_scale, causal, stream); \
    return;                                                                     \
  }
  DASH_FWD_INSTANTIATIONS(DASH_FWD_DISPATCH)
#undef DASH_FWD_DISPATCH
  throw Error(ErrorCode::kNotSupported, "forward: no sm90 kernel is compiled for dtype " +
                                            std::string(to_string(args.dtype)) + " with head_dim " +
                                            std::to_string(args.shape.head_dim));
}

}  // namespace dash_attn::sm90
