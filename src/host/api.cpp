#include "dash_attn/api.hpp"

#include "../kernels/sm90/launch.hpp"
#include "backward_plan.hpp"
#include "validate.hpp"

namespace dash_attn {

void forward(const ForwardArgs& args, const Options& options, cudaStream_t stream) {
  host::validate_forward(args, options);
  sm90::launch_forward(args, host::resolved_softmax_scale(args.shape, options), options.causal, stream);
}

std::size_t backward_workspace_size(const ProblemShape& shape, const Options& options) {
  host::validate_problem("backward_workspace_size", shape, options);
  return host::plan_backward_workspace(shape, options).total_bytes;
}

void backward(const BackwardArgs& args, const Options& options, cudaStream_t stream) {
  const host::BackwardWorkspace workspace = host::plan_backward_workspace(args.shape, options);
  host::validate_backward(args, options, workspace.total_bytes);
  (void)stream;
  throw Error(ErrorCode::kNotImplemented,
              "dash_attn::backward: the sm90 backward main kernel is not implemented yet (issue: deterministic backward)");
}

}  // namespace dash_attn
