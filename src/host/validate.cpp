#include "validate.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dash_attn/error.hpp"
#include "dash_attn/kernel_table.hpp"
#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/tile_config.hpp"
#include "overlap.hpp"

namespace dash_attn::host {
namespace {

[[noreturn]] void fail(ErrorCode code, const char* function, const std::string& argument, const std::string& what) {
  throw Error(code, std::string("dash_attn::") + function + ": argument '" + argument + "': " + what);
}

template <class T>
std::string str(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// 16 bytes: TMA needs 16-byte aligned base addresses and global strides.
constexpr int64_t kAlignBytes = 16;
constexpr int64_t kElementBytes = 2;  // bf16 and fp16
// TMA encodes global strides in 40 bits of bytes.
constexpr int64_t kMaxStrideBytes = int64_t{1} << 40;
// The smallest tile any kernel uses; tile counts must fit the 32-bit tile
// indices and reduction counters of the kernels and schedules.
constexpr int64_t kSmallestBlock = 64;

void check_positive(const char* function, const char* name, int64_t value) {
  if (value < 1) fail(ErrorCode::kInvalidArgument, function, name, "expected >= 1 (empty tensors are not accepted), got " + str(value));
}

void check_tensor(const char* function, const char* name, const TensorView& t, int64_t batch, int64_t seqlen, int64_t heads) {
  if (t.data == nullptr) fail(ErrorCode::kInvalidArgument, function, name, "expected a non-null device pointer");
  if (reinterpret_cast<std::uintptr_t>(t.data) % kAlignBytes != 0)
    fail(ErrorCode::kInvalidArgument, function, name, "expected a 16-byte aligned data pointer");
  if (t.dim_stride != 1)
    fail(ErrorCode::kInvalidArgument, function, name,
         "expected a contiguous last (head_dim) dimension, dim_stride 1, got " + str(t.dim_stride));
  struct Dim {
    const char* label;
    int64_t size;
    int64_t stride;
  };
  for (const Dim& d : {Dim{"batch_stride", batch, t.batch_stride}, Dim{"seq_stride", seqlen, t.seq_stride},
                       Dim{"head_stride", heads, t.head_stride}}) {
    if (d.size == 1) continue;  // the stride of a size-1 dimension is never used
    if (d.stride <= 0)
      fail(ErrorCode::kInvalidArgument, function, name, std::string("expected a positive ") + d.label + ", got " + str(d.stride));
    if (d.stride * kElementBytes % kAlignBytes != 0)
      fail(ErrorCode::kInvalidArgument, function, name,
           std::string("expected ") + d.label + " to be a multiple of 8 elements (16 bytes), got " + str(d.stride));
    if (d.stride > kMaxStrideBytes / kElementBytes)
      fail(ErrorCode::kInvalidArgument, function, name, std::string(d.label) + " " + str(d.stride) + " exceeds the 2^40-byte TMA limit");
  }
}

void check_lse(const char* function, const char* name, const LseView& lse, const ProblemShape& s) {
  if (lse.data == nullptr) fail(ErrorCode::kInvalidArgument, function, name, "expected a non-null device pointer");
  if (reinterpret_cast<std::uintptr_t>(lse.data) % alignof(float) != 0)
    fail(ErrorCode::kInvalidArgument, function, name, "expected a 4-byte aligned float pointer");
  if (s.batch > 1 && lse.batch_stride < s.heads_q * s.seqlen_q)
    fail(ErrorCode::kInvalidArgument, function, name,
         "expected batch_stride >= heads_q * seqlen_q = " + str(s.heads_q * s.seqlen_q) + ", got " + str(lse.batch_stride));
  if (s.heads_q > 1 && lse.head_stride < s.seqlen_q)
    fail(ErrorCode::kInvalidArgument, function, name,
         "expected head_stride >= seqlen_q = " + str(s.seqlen_q) + ", got " + str(lse.head_stride));
}

// The tensors of the forward pass, which the backward reads too.
void check_forward_tensors(const char* function, const ProblemShape& s, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& out, const LseView& lse) {
  check_tensor(function, "q", q, s.batch, s.seqlen_q, s.heads_q);
  check_tensor(function, "k", k, s.batch, s.seqlen_k, s.heads_kv);
  check_tensor(function, "v", v, s.batch, s.seqlen_k, s.heads_kv);
  check_tensor(function, "out", out, s.batch, s.seqlen_q, s.heads_q);
  check_lse(function, "lse", lse, s);
}

struct Named {
  const char* name;
  StridedView view;
};

StridedView view_of(const TensorView& t, int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return {t.data, kElementBytes, 4, {batch, seqlen, heads, head_dim}, {t.batch_stride, t.seq_stride, t.head_stride, 1}};
}

StridedView view_of(const LseView& l, const ProblemShape& s) {
  return {l.data, sizeof(float), 3, {s.batch, s.heads_q, s.seqlen_q}, {l.batch_stride, l.head_stride, 1}};
}

// Each output against every input and every other output.
void check_no_overlap(const char* function, const std::vector<Named>& outputs, const std::vector<Named>& inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    if (out->view.data == nullptr) continue;  // an absent optional buffer
    for (const Named& in : inputs)
      if (in.view.data != nullptr && views_overlap(out->view, in.view))
        fail(ErrorCode::kInvalidArgument, function, out->name,
             std::string("overlaps '") + in.name + "' in memory; outputs must not alias inputs or each other");
    for (auto other = outputs.begin(); other != out; ++other)
      if (other->view.data != nullptr && views_overlap(out->view, other->view))
        fail(ErrorCode::kInvalidArgument, function, out->name,
             std::string("overlaps '") + other->name + "' in memory; outputs must not alias inputs or each other");
  }
}

// heads_q fp32 in device memory (ForwardArgs::sinks), optional.
void check_sinks(const char* function, const char* name, const void* sinks) {
  if (reinterpret_cast<std::uintptr_t>(sinks) % alignof(float) != 0)
    fail(ErrorCode::kInvalidArgument, function, name, "expected a 4-byte aligned float pointer (heads_q fp32) or null");
}

StridedView sinks_view(const void* sinks, const ProblemShape& s) {
  return sinks != nullptr ? StridedView{sinks, sizeof(float), 1, {s.heads_q}, {1}} : StridedView{};
}

}  // namespace

bool has_window(const Options& options) {
  return mask::requests_window(options.causal, options.window_left, options.window_right);
}

bool has_score_mods(const Options& options) { return has_window(options) || options.softcap > 0.0f; }

void validate_problem(const char* function, const ProblemShape& s, const Options& options) {
  check_positive(function, "shape.batch", s.batch);
  check_positive(function, "shape.seqlen_q", s.seqlen_q);
  check_positive(function, "shape.seqlen_k", s.seqlen_k);
  check_positive(function, "shape.heads_q", s.heads_q);
  check_positive(function, "shape.heads_kv", s.heads_kv);
  check_positive(function, "shape.head_dim", s.head_dim);
  if (!is_supported_head_dim(s.head_dim))
    fail(ErrorCode::kNotSupported, function, "shape.head_dim", "expected one of 64, 128, 256, got " + str(s.head_dim));
  if (s.heads_q % s.heads_kv != 0)
    fail(ErrorCode::kInvalidArgument, function, "shape.heads_kv",
         "expected a divisor of heads_q = " + str(s.heads_q) + " (GQA/MQA), got " + str(s.heads_kv));
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  const int64_t seqlen_limit = kMaxIndex - kSmallestBlock;
  if (s.seqlen_q > seqlen_limit)
    fail(ErrorCode::kNotSupported, function, "shape.seqlen_q", "expected <= " + str(seqlen_limit) + ", got " + str(s.seqlen_q));
  if (s.seqlen_k > seqlen_limit)
    fail(ErrorCode::kNotSupported, function, "shape.seqlen_k", "expected <= " + str(seqlen_limit) + ", got " + str(s.seqlen_k));
  const int64_t q_tiles = (s.seqlen_q + kSmallestBlock - 1) / kSmallestBlock;
  const int64_t k_tiles = (s.seqlen_k + kSmallestBlock - 1) / kSmallestBlock;
  // Compare by division so the product itself cannot overflow.
  if (q_tiles > kMaxIndex / s.batch / s.heads_q)
    fail(ErrorCode::kNotSupported, function, "shape",
         "batch * heads_q * ceil(seqlen_q / 64) = " + str(s.batch) + " * " + str(s.heads_q) + " * " + str(q_tiles) +
             " overflows the 32-bit tile index");
  if (k_tiles > kMaxIndex / s.batch / s.heads_q)
    fail(ErrorCode::kNotSupported, function, "shape",
         "batch * heads_q * ceil(seqlen_k / 64) = " + str(s.batch) + " * " + str(s.heads_q) + " * " + str(k_tiles) +
             " overflows the 32-bit tile index");
  if (options.softmax_scale && !(std::isfinite(*options.softmax_scale) && *options.softmax_scale != 0.0f))
    fail(ErrorCode::kInvalidArgument, function, "options.softmax_scale",
         "expected a finite non-zero value, got " + str(*options.softmax_scale));
  if (options.max_ctas < 0)
    fail(ErrorCode::kInvalidArgument, function, "options.max_ctas", "expected >= 0 (0: no cap), got " + str(options.max_ctas));
  if (options.sm_margin < 0)
    fail(ErrorCode::kInvalidArgument, function, "options.sm_margin", "expected >= 0, got " + str(options.sm_margin));
  const int64_t group = s.heads_q / s.heads_kv;
  if (options.q_heads_per_chain < 0 || (options.q_heads_per_chain > 0 && group % options.q_heads_per_chain != 0))
    fail(ErrorCode::kInvalidArgument, function, "options.q_heads_per_chain",
         "expected 0 (auto) or a divisor of heads_q / heads_kv = " + str(group) + ", got " +
             str(options.q_heads_per_chain));
  const auto kind = static_cast<int>(options.schedule);
  if (kind < static_cast<int>(ScheduleKind::kAtomic) || kind > static_cast<int>(ScheduleKind::kAuto))
    fail(ErrorCode::kInvalidArgument, function, "options.schedule", "expected a ScheduleKind value, got " + str(kind));
  if (options.deterministic && options.schedule == ScheduleKind::kAtomic)
    fail(ErrorCode::kInvalidArgument, function, "options.schedule",
         "'atomic' is not deterministic; set options.deterministic = false or choose a deterministic schedule");
  for (const auto& [name, bound] : {std::pair{"options.window_left", options.window_left},
                                    std::pair{"options.window_right", options.window_right}})
    if (bound < -1)
      fail(ErrorCode::kInvalidArgument, function, name,
           "expected -1 (unbounded) or a key count >= 0 (FlashAttention's window_size), got " + str(bound));
  if (!(std::isfinite(options.softcap) && options.softcap >= 0.0f))
    fail(ErrorCode::kInvalidArgument, function, "options.softcap",
         "expected 0 (off) or a finite positive cap, got " + str(options.softcap));
  if (!options.deterministic && options.schedule != ScheduleKind::kAtomic && options.schedule != ScheduleKind::kAuto)
    fail(ErrorCode::kInvalidArgument, function, "options.schedule",
         std::string("'") + std::string(to_string(options.schedule)) +
             "' is a deterministic schedule but options.deterministic is false; use 'atomic' or 'auto'");
}

void validate_backward_problem(const char* function, const ProblemShape& shape, const Options& options) {
  validate_problem(function, shape, options);
  if (has_window(options) && !schedule::supports_window(options.schedule))
    fail(ErrorCode::kNotSupported, function, "options.schedule",
         std::string("'") + std::string(to_string(options.schedule)) +
             "' is a wave schedule, whose chains and ranks assume no sliding window (schedule/resolve.hpp, "
             "supports_window); with options.window_left/window_right choose 'descending', 'fa3', 'auto' or, "
             "non-deterministic, 'atomic'");
}

void validate_forward(const ForwardArgs& a, const Options& options) {
  constexpr const char* kFn = "forward";
  validate_problem(kFn, a.shape, options);
  check_forward_tensors(kFn, a.shape, a.q, a.k, a.v, a.out, a.lse);
  const ProblemShape& s = a.shape;
  const int64_t d = s.head_dim;
  check_sinks(kFn, "sinks", a.sinks);
  check_no_overlap(kFn, {{"out", view_of(a.out, s.batch, s.seqlen_q, s.heads_q, d)}, {"lse", view_of(a.lse, s)}},
                   {{"q", view_of(a.q, s.batch, s.seqlen_q, s.heads_q, d)},
                    {"k", view_of(a.k, s.batch, s.seqlen_k, s.heads_kv, d)},
                    {"v", view_of(a.v, s.batch, s.seqlen_k, s.heads_kv, d)},
                    {"sinks", sinks_view(a.sinks, s)}});
}

namespace {

// dout, the optional dlse, dq, dk, dv and the workspace of a backward over `s`.
void check_backward_outputs(const char* kFn, const ProblemShape& s, const TensorView& dout, const LseView& dlse,
                            const TensorView& dq, const TensorView& dk, const TensorView& dv, const void* workspace,
                            std::size_t workspace_bytes, std::size_t required_workspace_bytes,
                            const char* size_function) {
  check_tensor(kFn, "dout", dout, s.batch, s.seqlen_q, s.heads_q);
  if (dlse.data != nullptr) check_lse(kFn, "dlse", dlse, s);  // optional
  check_tensor(kFn, "dq", dq, s.batch, s.seqlen_q, s.heads_q);
  check_tensor(kFn, "dk", dk, s.batch, s.seqlen_k, s.heads_kv);
  check_tensor(kFn, "dv", dv, s.batch, s.seqlen_k, s.heads_kv);
  if (workspace_bytes < required_workspace_bytes)
    fail(ErrorCode::kInvalidArgument, kFn, "workspace_bytes",
         std::string("expected >= ") + size_function + "() = " + str(required_workspace_bytes) + ", got " + str(workspace_bytes));
  if (required_workspace_bytes > 0 && workspace == nullptr)
    fail(ErrorCode::kInvalidArgument, kFn, "workspace", "expected a non-null device pointer");
  if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0)
    fail(ErrorCode::kInvalidArgument, kFn, "workspace", "expected a 256-byte aligned pointer");
}

std::vector<Named> backward_outputs(const ProblemShape& s, const TensorView& dq, const TensorView& dk,
                                        const TensorView& dv, const void* workspace, std::size_t workspace_bytes) {
  const int64_t d = s.head_dim;
  const StridedView space{workspace, 1, 1, {static_cast<int64_t>(workspace_bytes)}, {1}};
  return {{"dq", view_of(dq, s.batch, s.seqlen_q, s.heads_q, d)},
          {"dk", view_of(dk, s.batch, s.seqlen_k, s.heads_kv, d)},
          {"dv", view_of(dv, s.batch, s.seqlen_k, s.heads_kv, d)},
          {"workspace", workspace_bytes > 0 ? space : StridedView{}}};
}

std::vector<Named> backward_inputs(const ProblemShape& s, const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView& out, const TensorView& dout,
                                       const LseView& lse, const LseView& dlse) {
  const int64_t d = s.head_dim;
  return {{"q", view_of(q, s.batch, s.seqlen_q, s.heads_q, d)},
          {"k", view_of(k, s.batch, s.seqlen_k, s.heads_kv, d)},
          {"v", view_of(v, s.batch, s.seqlen_k, s.heads_kv, d)},
          {"out", view_of(out, s.batch, s.seqlen_q, s.heads_q, d)},
          {"dout", view_of(dout, s.batch, s.seqlen_q, s.heads_q, d)},
          {"lse", view_of(lse, s)},
          {"dlse", dlse.data != nullptr ? view_of(dlse, s) : StridedView{}}};
}

// The rules on a varlen batch's totals and arrays that hold without reading them.
void check_varlen_lengths(const char* kFn, const ProblemShape& s, const VarlenLengths& l) {
  check_positive(kFn, "lengths.total_q", l.total_q);
  check_positive(kFn, "lengths.total_k", l.total_k);
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  for (const auto& [name, total] : {std::pair{"lengths.total_q", l.total_q}, std::pair{"lengths.total_k", l.total_k}})
    if (total > kMaxIndex - kSmallestBlock)
      fail(ErrorCode::kNotSupported, kFn, name, "expected <= " + str(kMaxIndex - kSmallestBlock) + ", got " + str(total));
  // Whatever the lengths hold, the batch has at most total / 64 + batch
  // tiles per head (accumulator_tiles.hpp): the tile indices must fit 32 bits.
  if ((std::max(l.total_q, l.total_k) / kSmallestBlock + s.batch + 1) > kMaxIndex / s.heads_q)
    fail(ErrorCode::kNotSupported, kFn, "shape",
         "heads_q * (total_q / 64 + batch) overflows the 32-bit tile index");
  for (const auto& [name, pointer] : {std::pair{"lengths.cu_seqlens_q", l.cu_seqlens_q},
                                      std::pair{"lengths.cu_seqlens_k", l.cu_seqlens_k}})
    if (pointer == nullptr) fail(ErrorCode::kInvalidArgument, kFn, name, "expected a device pointer to batch + 1 int32");
  for (const auto& [name, pointer] :
       {std::pair{"lengths.cu_seqlens_q", l.cu_seqlens_q}, std::pair{"lengths.cu_seqlens_k", l.cu_seqlens_k},
        std::pair{"lengths.seqused_q", l.seqused_q}, std::pair{"lengths.seqused_k", l.seqused_k}})
    if (reinterpret_cast<std::uintptr_t>(pointer) % alignof(int32_t) != 0)
      fail(ErrorCode::kInvalidArgument, kFn, name, "expected a 4-byte aligned int32 pointer");
}

// The sinks and their gradient (which needs them); the sinks join the inputs.
void check_backward_sinks(const char* kFn, const ProblemShape& s, const float* sinks, const float* dsinks,
                          std::vector<Named>& inputs) {
  check_sinks(kFn, "sinks", sinks);
  check_sinks(kFn, "dsinks", dsinks);
  if (dsinks != nullptr && sinks == nullptr)
    fail(ErrorCode::kInvalidArgument, kFn, "dsinks", "is the sinks' gradient, but 'sinks' is null");
  inputs.push_back({"sinks", sinks_view(sinks, s)});
}

StridedView int32_view(const int32_t* p, int64_t count) {
  return p != nullptr ? StridedView{p, sizeof(int32_t), 1, {count}, {1}} : StridedView{};
}

// The length arrays as overlap inputs.
std::vector<Named> length_views(const ProblemShape& s, const VarlenLengths& l) {
  return {{"lengths.cu_seqlens_q", int32_view(l.cu_seqlens_q, s.batch + 1)},
          {"lengths.cu_seqlens_k", int32_view(l.cu_seqlens_k, s.batch + 1)},
          {"lengths.seqused_q", int32_view(l.seqused_q, s.batch)},
          {"lengths.seqused_k", int32_view(l.seqused_k, s.batch)}};
}

}  // namespace

void validate_forward_varlen(const VarlenForwardArgs& a, const Options& options) {
  constexpr const char* kFn = "forward_varlen";
  validate_problem(kFn, a.shape, options);
  const ProblemShape& s = a.shape;
  const VarlenLengths& l = a.lengths;
  check_varlen_lengths(kFn, s, l);
  // The packed tensors are (total, heads, head_dim): one "batch" of total rows.
  ProblemShape packed{1, l.total_q, l.total_k, s.heads_q, s.heads_kv, s.head_dim};
  check_forward_tensors(kFn, packed, a.q, a.k, a.v, a.out, a.lse);
  const int64_t d = s.head_dim;
  std::vector<Named> inputs = {{"q", view_of(a.q, 1, l.total_q, s.heads_q, d)},
                                   {"k", view_of(a.k, 1, l.total_k, s.heads_kv, d)},
                                   {"v", view_of(a.v, 1, l.total_k, s.heads_kv, d)}};
  for (const Named& v : length_views(s, l)) inputs.push_back(v);
  check_sinks(kFn, "sinks", a.sinks);
  inputs.push_back({"sinks", sinks_view(a.sinks, s)});
  check_no_overlap(kFn, {{"out", view_of(a.out, 1, l.total_q, s.heads_q, d)}, {"lse", view_of(a.lse, packed)}}, inputs);
}

void validate_backward_varlen_problem(const char* function, const ProblemShape& shape, const VarlenLengths& lengths,
                                      const Options& options) {
  validate_backward_problem(function, shape, options);
  check_varlen_lengths(function, shape, lengths);
  if (schedule::is_wave_schedule(options.schedule))
    fail(ErrorCode::kNotSupported, function, "options.schedule",
         std::string("'") + std::string(to_string(options.schedule)) +
             "' is a wave schedule, which a variable-length batch does not run (its waves would span sequences); "
             "choose 'descending', 'fa3', 'auto' or, non-deterministic, 'atomic'");
}

void validate_backward_varlen(const VarlenBackwardArgs& a, std::size_t required_workspace_bytes) {
  constexpr const char* kFn = "backward_varlen";
  const ProblemShape& s = a.shape;
  const VarlenLengths& l = a.lengths;
  ProblemShape packed{1, l.total_q, l.total_k, s.heads_q, s.heads_kv, s.head_dim};
  check_forward_tensors(kFn, packed, a.q, a.k, a.v, a.out, a.lse);
  check_backward_outputs(kFn, packed, a.dout, a.dlse, a.dq, a.dk, a.dv, a.workspace, a.workspace_bytes,
                         required_workspace_bytes, "backward_varlen_workspace_size");
  std::vector<Named> inputs = backward_inputs(packed, a.q, a.k, a.v, a.out, a.dout, a.lse, a.dlse);
  for (const Named& v : length_views(s, l)) inputs.push_back(v);
  check_backward_sinks(kFn, s, a.sinks, a.dsinks, inputs);
  std::vector<Named> outputs = backward_outputs(packed, a.dq, a.dk, a.dv, a.workspace, a.workspace_bytes);
  outputs.push_back({"dsinks", sinks_view(a.dsinks, s)});
  check_no_overlap(kFn, outputs, inputs);
}

void validate_backward(const BackwardArgs& a, const Options& options, std::size_t required_workspace_bytes) {
  constexpr const char* kFn = "backward";
  validate_backward_problem(kFn, a.shape, options);
  const ProblemShape& s = a.shape;
  check_forward_tensors(kFn, s, a.q, a.k, a.v, a.out, a.lse);
  check_backward_outputs(kFn, s, a.dout, a.dlse, a.dq, a.dk, a.dv, a.workspace, a.workspace_bytes,
                         required_workspace_bytes, "backward_workspace_size");
  std::vector<Named> inputs = backward_inputs(s, a.q, a.k, a.v, a.out, a.dout, a.lse, a.dlse);
  check_backward_sinks(kFn, s, a.sinks, a.dsinks, inputs);
  std::vector<Named> outputs = backward_outputs(s, a.dq, a.dk, a.dv, a.workspace, a.workspace_bytes);
  outputs.push_back({"dsinks", sinks_view(a.dsinks, s)});
  check_no_overlap(kFn, outputs, inputs);
}

bool runs_sm90_kernels(int major, int minor) { return major == 9 && minor == 0; }

void validate_device(const char* function, int device, const char* name, int major, int minor) {
  if (runs_sm90_kernels(major, minor)) return;
  throw Error(ErrorCode::kNotSupported, std::string("dash_attn::") + function + ": device " + str(device) + " (" +
                                            name + ") has compute capability " + str(major) + "." + str(minor) +
                                            "; dash_attn's kernels are built for sm_90a (H100/H200/H800, "
                                            "compute capability 9.0) and run on nothing else");
}

float resolved_softmax_scale(const ProblemShape& shape, const Options& options) {
  return options.softmax_scale ? *options.softmax_scale : 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
}

}  // namespace dash_attn::host
