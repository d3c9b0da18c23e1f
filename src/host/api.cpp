#include "dash_attn/api.hpp"

#include <algorithm>
#include <string>

#include "../dispatch/device_scope.hpp"
#include "../kernels/sm90/launch.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "backward_plan.hpp"
#include "validate.hpp"

namespace dash_attn {

void forward(const ForwardArgs& args, const Options& options, cudaStream_t stream) {
  host::validate_forward(args, options);
  const dispatch::DeviceScope scope("forward", {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data},
                                                {"out", args.out.data}, {"lse", args.lse.data}}, stream);
  sm90::launch_forward(args, host::resolved_softmax_scale(args.shape, options), options.causal,
                       sm90::usable_sm_count("forward", options.sm_margin), stream);
}

std::size_t backward_workspace_size(const ProblemShape& shape, const Options& options) {
  host::validate_problem("backward_workspace_size", shape, options);
  return host::plan_backward_workspace(shape, options).total_bytes;
}

void backward(const BackwardArgs& args, const Options& options, cudaStream_t stream) {
  // The shape is checked before it is planned: the plan's arithmetic assumes a valid one.
  host::validate_problem("backward", args.shape, options);
  const host::BackwardWorkspace workspace = host::plan_backward_workspace(args.shape, options);
  host::validate_backward(args, options, workspace.total_bytes);
  const dispatch::DeviceScope scope("backward", {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data},
                                                 {"out", args.out.data}, {"dout", args.dout.data},
                                                 {"lse", args.lse.data}, {"dlse", args.dlse.data}, {"dq", args.dq.data}, {"dk", args.dk.data},
                                                 {"dv", args.dv.data}, {"workspace", args.workspace}}, stream);
  sm90::BackwardMainConfig config;
  config.problem = host::backward_tile_problem(args.shape, options);
  const ScheduleKind kind = host::backward_schedule(args.shape, options);
  config.schedule = schedule::Schedule(kind);
  config.softmax_scale = host::resolved_softmax_scale(args.shape, options);
  // Wave schedules need a wave of co-resident CTAs; refuse rather than risk a hang.
  const int capacity = sm90::backward_main_capacity(args, sm90::usable_sm_count("backward", options.sm_margin));
  const int cap = options.max_ctas > 0 ? std::min(options.max_ctas, capacity) : capacity;
  const int need = config.schedule.required_coresidency(config.problem);
  if (need > cap)
    throw Error(ErrorCode::kUnsafeSchedule,
                "dash_attn::backward: schedule '" + std::string(to_string(kind)) + "' needs " +
                    std::to_string(need) + " co-resident CTAs (one wave of this shape) but only " + std::to_string(cap) +
                    " are allowed (options.max_ctas = " + std::to_string(options.max_ctas) + ", options.sm_margin = " +
                    std::to_string(options.sm_margin) + ", device holds " +
                    std::to_string(capacity) + "); raise max_ctas or choose 'fa3' or 'descending', which run on any grid");
  config.cooperative = need > 1;
  config.grid = config.schedule.launch_grid(config.problem, cap);
  sm90::launch_backward_preprocess(args, workspace, stream);
  sm90::launch_backward_main(args, workspace, config, stream);
  sm90::launch_backward_postprocess(args, workspace, config.softmax_scale, stream);
}

}  // namespace dash_attn
