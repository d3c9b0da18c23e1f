#include "dash_attn/api.hpp"

#include <algorithm>
#include <string>

#include "dash_attn/plan/backward_plan.hpp"
#include "dash_attn/plan/forward_plan.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "device_scope.hpp"
#include "host/validate.hpp"
#include "kernel_dispatch.hpp"

namespace dash_attn {

void forward(const ForwardArgs& args, const Options& options, cudaStream_t stream) {
  host::validate_forward(args, options);
  const dispatch::DeviceScope scope("forward", {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data},
                                                {"out", args.out.data}, {"lse", args.lse.data}, {"sinks", args.sinks}}, stream);
  const float scale = host::resolved_softmax_scale(args.shape, options);
  // The row maximum is taken on raw scores and scaled afterwards, which is
  // only the maximum of the scaled scores when the scale is positive.
  if (!(scale > 0.0f))
    throw Error(ErrorCode::kNotSupported, "dash_attn::forward: the sm90 kernel needs a positive softmax_scale, got " +
                                              std::to_string(scale));
  const schedule::ForwardPlan plan =
      host::plan_forward(args.shape, options.causal, dispatch::usable_sm_count("forward", options.sm_margin),
                         options.window_left, options.window_right);
  dispatch::launch_forward(args, sm90::ForwardConfig{scale, options.softcap}, plan,
                           host::has_score_mods(options), stream);
}

void forward_varlen(const VarlenForwardArgs& args, const Options& options, cudaStream_t stream) {
  host::validate_forward_varlen(args, options);
  const VarlenLengths& l = args.lengths;
  const dispatch::DeviceScope scope("forward_varlen",
                                    {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data}, {"out", args.out.data},
                                     {"lse", args.lse.data}, {"sinks", args.sinks}, {"lengths.cu_seqlens_q", l.cu_seqlens_q},
                                     {"lengths.cu_seqlens_k", l.cu_seqlens_k}, {"lengths.seqused_q", l.seqused_q},
                                     {"lengths.seqused_k", l.seqused_k}},
                                    stream);
  const float scale = host::resolved_softmax_scale(args.shape, options);
  if (!(scale > 0.0f))
    throw Error(ErrorCode::kNotSupported,
                "dash_attn::forward_varlen: the sm90 kernel needs a positive softmax_scale, got " + std::to_string(scale));
  const schedule::VarlenForwardTiles tiles =
      host::plan_forward_varlen(args.shape, args.lengths, options.causal,
                                dispatch::usable_sm_count("forward_varlen", options.sm_margin), options.window_left,
                                options.window_right);
  sm90::launch_clear_unowned_forward_rows(args, stream);
  dispatch::launch_forward_varlen(args, sm90::ForwardConfig{scale, options.softcap}, tiles,
                                  host::has_score_mods(options), stream);
}

std::size_t backward_workspace_size(const ProblemShape& shape, const Options& options) {
  host::validate_backward_problem("backward_workspace_size", shape, options);
  return host::plan_backward_workspace(shape, options).total_bytes;
}

namespace {

// The main kernel's launch over `problem` (equal lengths or varlen), after
// validation; the workspace is `workspace`'s layout.
void run_backward(const char* function, const BackwardArgs& args, const plan::BackwardWorkspace& workspace,
                  const schedule::TileProblem& problem, ScheduleKind kind, const Options& options,
                  cudaStream_t stream) {
  sm90::BackwardMainConfig config;
  config.problem = problem;
  config.schedule = schedule::Schedule(kind, problem, host::backward_chain_heads(args.shape, options));
  config.softmax_scale = host::resolved_softmax_scale(args.shape, options);
  config.softcap = options.softcap;
  const int capacity = dispatch::backward_main_capacity(dispatch::usable_sm_count(function, options.sm_margin));
  const int cap = options.max_ctas > 0 ? std::min(options.max_ctas, capacity) : capacity;
  if (problem.is_varlen()) {
    // The items are on the device: one CTA per item of the longest sequences, up to the cap.
    const schedule::HeadTiles longest{static_cast<int>(args.shape.seqlen_q), static_cast<int>(args.shape.seqlen_k),
                                      problem.block_m, problem.block_n, problem.causal};
    const int64_t bound =
        args.shape.batch * config.schedule.chain_spans(problem) * config.schedule.items_per_head(longest);
    config.grid = static_cast<int>(std::clamp<int64_t>(bound, 1, cap));
  } else {
    // Wave schedules need a wave of co-resident CTAs; refuse rather than risk a hang.
    const int need = config.schedule.required_coresidency(problem);
    if (need > cap)
      throw Error(ErrorCode::kUnsafeSchedule,
                  std::string("dash_attn::") + function + ": schedule '" + std::string(to_string(kind)) + "' needs " +
                      std::to_string(need) + " co-resident CTAs (one wave of this shape) but only " +
                      std::to_string(cap) + " are allowed (options.max_ctas = " + std::to_string(options.max_ctas) +
                      ", options.sm_margin = " + std::to_string(options.sm_margin) + ", device holds " +
                      std::to_string(capacity) + "); raise max_ctas or choose 'fa3' or 'descending', which run on any grid");
    config.cooperative = need > 1;
    config.grid = config.schedule.launch_grid(problem, cap);
  }
  if (problem.is_varlen()) sm90::launch_zero_unowned_gradient_rows(args, problem, stream);
  sm90::launch_backward_preprocess(args, workspace, problem, config.softmax_scale, config.softcap, stream);
  dispatch::launch_backward_main(args, workspace, config, host::has_score_mods(options), stream);
  sm90::launch_backward_postprocess(args, workspace, problem, config.softmax_scale, stream);
}

// The varlen arguments as the kernels read them: the packed tensors with
// batch_stride 0, each sequence offset by its first row.
BackwardArgs packed_backward_args(const VarlenBackwardArgs& a) {
  BackwardArgs packed;
  packed.shape = a.shape;
  packed.dtype = a.dtype;
  auto rows = [](TensorView t) {
    t.batch_stride = 0;
    return t;
  };
  auto lse_rows = [](LseView l) {
    l.batch_stride = 0;
    return l;
  };
  packed.q = rows(a.q), packed.k = rows(a.k), packed.v = rows(a.v), packed.out = rows(a.out);
  packed.dout = rows(a.dout), packed.dq = rows(a.dq), packed.dk = rows(a.dk), packed.dv = rows(a.dv);
  packed.lse = lse_rows(a.lse);
  packed.dlse = lse_rows(a.dlse);
  packed.workspace = a.workspace;
  packed.workspace_bytes = a.workspace_bytes;
  packed.sinks = a.sinks;
  packed.dsinks = a.dsinks;
  return packed;
}

}  // namespace

void backward(const BackwardArgs& args, const Options& options, cudaStream_t stream) {
  // The shape is checked before it is planned: the plan's arithmetic assumes a valid one.
  host::validate_backward_problem("backward", args.shape, options);
  const plan::BackwardWorkspace workspace = host::plan_backward_workspace(args.shape, options);
  host::validate_backward(args, options, workspace.total_bytes);
  const dispatch::DeviceScope scope("backward", {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data},
                                                 {"out", args.out.data}, {"dout", args.dout.data},
                                                 {"lse", args.lse.data}, {"dlse", args.dlse.data}, {"dq", args.dq.data}, {"dk", args.dk.data},
                                                 {"dv", args.dv.data}, {"workspace", args.workspace},
                                                 {"sinks", args.sinks}, {"dsinks", args.dsinks}}, stream);
  run_backward("backward", args, workspace, host::backward_tile_problem(args.shape, options),
               host::backward_schedule(args.shape, options), options, stream);
}

std::size_t backward_varlen_workspace_size(const ProblemShape& shape, const VarlenLengths& lengths,
                                           const Options& options) {
  host::validate_backward_varlen_problem("backward_varlen_workspace_size", shape, lengths, options);
  return host::plan_backward_varlen_workspace(shape, lengths, options).total_bytes;
}

void backward_varlen(const VarlenBackwardArgs& args, const Options& options, cudaStream_t stream) {
  host::validate_backward_varlen_problem("backward_varlen", args.shape, args.lengths, options);
  const plan::BackwardWorkspace workspace = host::plan_backward_varlen_workspace(args.shape, args.lengths, options);
  host::validate_backward_varlen(args, workspace.total_bytes);
  const VarlenLengths& l = args.lengths;
  const dispatch::DeviceScope scope(
      "backward_varlen",
      {{"q", args.q.data}, {"k", args.k.data}, {"v", args.v.data}, {"out", args.out.data}, {"dout", args.dout.data},
       {"lse", args.lse.data}, {"dlse", args.dlse.data}, {"dq", args.dq.data}, {"dk", args.dk.data},
       {"dv", args.dv.data}, {"workspace", args.workspace}, {"sinks", args.sinks}, {"dsinks", args.dsinks},
       {"lengths.cu_seqlens_q", l.cu_seqlens_q},
       {"lengths.cu_seqlens_k", l.cu_seqlens_k}, {"lengths.seqused_q", l.seqused_q},
       {"lengths.seqused_k", l.seqused_k}},
      stream);
  run_backward("backward_varlen", packed_backward_args(args), workspace,
               host::backward_varlen_tile_problem(args.shape, args.lengths, options),
               host::backward_varlen_schedule(options), options, stream);
}

}  // namespace dash_attn
