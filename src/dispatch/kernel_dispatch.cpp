#include "kernel_dispatch.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "dash_attn/compiled_kernels.hpp"
#include "dash_attn/cuda_check.hpp"

namespace dash_attn::dispatch {
namespace {

[[noreturn]] void not_compiled(const char* pass, DType dtype, int64_t head_dim, bool score_mods) {
  throw Error(ErrorCode::kNotSupported, std::string("dash_attn::") + pass + ": no sm90 kernel is compiled for dtype " +
                                            std::string(to_string(dtype)) + " with head_dim " +
                                            std::to_string(head_dim) +
                                            (score_mods ? " and score mods (window or softcap)" : "") +
                                            " (the rows of include/dash_attn/kernel_table.hpp this build has: "
                                            "dash_attn/compiled_kernels.hpp, -DDASH_KERNELS)");
}

}  // namespace

void launch_forward(const ForwardArgs& args, const sm90::ForwardConfig& config, const schedule::ForwardPlan& plan,
                    bool score_mods, cudaStream_t stream) {
#define DASH_RUN_FORWARD(row_dtype, row_head_dim, row_mods)                                             \
  if (args.dtype == DType::k##row_dtype && args.shape.head_dim == row_head_dim && score_mods == row_mods) \
    return sm90::run_forward<DType::k##row_dtype, row_head_dim, row_mods>(args, config, plan, stream);
  DASH_COMPILED_FORWARD_KERNELS(DASH_RUN_FORWARD)
#undef DASH_RUN_FORWARD
  not_compiled("forward", args.dtype, args.shape.head_dim, score_mods);
}

void launch_forward_varlen(const VarlenForwardArgs& args, const sm90::ForwardConfig& config,
                           const schedule::VarlenForwardTiles& tiles, bool score_mods, cudaStream_t stream) {
#define DASH_RUN_FORWARD_VARLEN(row_dtype, row_head_dim, row_mods)                                      \
  if (args.dtype == DType::k##row_dtype && args.shape.head_dim == row_head_dim && score_mods == row_mods) \
    return sm90::run_forward_varlen<DType::k##row_dtype, row_head_dim, row_mods>(args, config, tiles, stream);
  DASH_COMPILED_FORWARD_KERNELS(DASH_RUN_FORWARD_VARLEN)
#undef DASH_RUN_FORWARD_VARLEN
  not_compiled("forward_varlen", args.dtype, args.shape.head_dim, score_mods);
}

void launch_backward_main(const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                          const sm90::BackwardMainConfig& config, bool score_mods, cudaStream_t stream) {
#define DASH_RUN_BACKWARD(row_dtype, row_head_dim, row_mods)                                            \
  if (args.dtype == DType::k##row_dtype && args.shape.head_dim == row_head_dim && score_mods == row_mods) \
    return sm90::run_backward_main<DType::k##row_dtype, row_head_dim, row_mods>(args, workspace, config, stream);
  DASH_COMPILED_BACKWARD_KERNELS(DASH_RUN_BACKWARD)
#undef DASH_RUN_BACKWARD
  not_compiled("backward", args.dtype, args.shape.head_dim, score_mods);
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

// Every backward instantiation uses more than half of an SM's shared memory: one CTA per SM.
int backward_main_capacity(int sm_count) { return sm_count; }

}  // namespace dash_attn::dispatch
