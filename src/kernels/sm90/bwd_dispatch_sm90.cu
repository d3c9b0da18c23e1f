// Maps (dtype, head_dim) to the compiled backward main-kernel instantiation.
#include <string>

#include "cuda_check.hpp"
#include "launch.hpp"

namespace dash_attn::sm90 {

void launch_backward_main(const BackwardArgs& a, const host::BackwardWorkspace& w, const BackwardMainConfig& c,
                          cudaStream_t stream) {
  const bool bf16 = a.dtype == DType::kBF16;
  switch (a.shape.head_dim) {
    case 64:
      return bf16 ? launch_backward_main_instance<DType::kBF16, 64>(a, w, c, stream)
                  : launch_backward_main_instance<DType::kFP16, 64>(a, w, c, stream);
    case 128:
      return bf16 ? launch_backward_main_instance<DType::kBF16, 128>(a, w, c, stream)
                  : launch_backward_main_instance<DType::kFP16, 128>(a, w, c, stream);
    case 256:
      return bf16 ? launch_backward_main_instance<DType::kBF16, 256>(a, w, c, stream)
                  : launch_backward_main_instance<DType::kFP16, 256>(a, w, c, stream);
    default:
      throw Error(ErrorCode::kNotSupported,
                  "dash_attn::backward: head_dim " + std::to_string(a.shape.head_dim) +
                      " has no compiled sm90 backward kernel (64, 128 and 256 are built)");
  }
}

int backward_main_capacity(const BackwardArgs&, int sm_count) {
  // Every instantiation uses more than half of an SM's shared memory: one CTA per SM.
  return sm_count;
}

int usable_sm_count(const char* function, int sm_margin) {
  int device = 0, sms = 0;
  DASH_CUDA_CHECK(cudaGetDevice(&device));
  DASH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (sm_margin >= sms)
    throw Error(ErrorCode::kInvalidArgument, std::string("dash_attn::") + function + ": argument 'options.sm_margin': " +
                                                 std::to_string(sm_margin) + " leaves none of the device's " +
                                                 std::to_string(sms) + " SMs");
  return sms - sm_margin;
}

}  // namespace dash_attn::sm90
