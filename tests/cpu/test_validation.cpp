// Every validation rule of the public API, fed bad input, checked by its message.
#include <gtest/gtest.h>

#include <string>

#include "dash_attn/error.hpp"
#include "dash_attn/plan/backward_plan.hpp"
#include "host/overlap.hpp"
#include "host/validate.hpp"

namespace dash_attn {
namespace {

// Validation never dereferences pointers: fake, well-aligned addresses suffice.
// 256 MiB apart: the tensors of the test shapes never overlap.
void* fake_pointer(std::uintptr_t slot) { return reinterpret_cast<void*>(0x100000 + (slot << 28)); }

TensorView dense(std::uintptr_t slot, const ProblemShape& s, int64_t seqlen, int64_t heads) {
  return TensorView{fake_pointer(slot), seqlen * heads * s.head_dim, heads * s.head_dim, s.head_dim, 1};
}

ForwardArgs valid_forward() {
  ForwardArgs a;
  a.shape = ProblemShape{2, 100, 130, 8, 2, 128};
  a.q = dense(1, a.shape, a.shape.seqlen_q, a.shape.heads_q);
  a.k = dense(2, a.shape, a.shape.seqlen_k, a.shape.heads_kv);
  a.v = dense(3, a.shape, a.shape.seqlen_k, a.shape.heads_kv);
  a.out = dense(4, a.shape, a.shape.seqlen_q, a.shape.heads_q);
  a.lse = LseView{static_cast<float*>(fake_pointer(5)), a.shape.heads_q * a.shape.seqlen_q, a.shape.seqlen_q};
  return a;
}

BackwardArgs valid_backward(const Options& options) {
  const ForwardArgs f = valid_forward();
  BackwardArgs a;
  a.shape = f.shape;
  a.q = f.q, a.k = f.k, a.v = f.v, a.out = f.out, a.lse = f.lse;
  a.dout = dense(6, a.shape, a.shape.seqlen_q, a.shape.heads_q);
  a.dq = dense(7, a.shape, a.shape.seqlen_q, a.shape.heads_q);
  a.dk = dense(8, a.shape, a.shape.seqlen_k, a.shape.heads_kv);
  a.dv = dense(9, a.shape, a.shape.seqlen_k, a.shape.heads_kv);
  a.workspace_bytes = host::plan_backward_workspace(a.shape, options).total_bytes;
  a.workspace = fake_pointer(10);
  return a;
}

// Runs `call`, expects dash_attn::Error with `code` and every fragment in its message.
template <class Call>
void expect_error(Call call, ErrorCode code, std::initializer_list<std::string> fragments) {
  try {
    call();
    ADD_FAILURE() << "expected dash_attn::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

template <class Mutate>
void expect_forward_error(Mutate mutate, ErrorCode code, std::initializer_list<std::string> fragments,
                          Options options = {}) {
  ForwardArgs a = valid_forward();
  mutate(a, options);
  expect_error([&] { host::validate_forward(a, options); }, code, fragments);
}

TEST(Validation, AcceptsValidArguments) {
  const Options options;
  EXPECT_NO_THROW(host::validate_forward(valid_forward(), options));
  const BackwardArgs b = valid_backward(options);
  EXPECT_NO_THROW(host::validate_backward(b, options, b.workspace_bytes));
}

TEST(Validation, AcceptsAnyStrideOfSizeOneDimensions) {
  ForwardArgs a = valid_forward();
  a.shape.batch = 1;
  a.shape.heads_q = a.shape.heads_kv = 1;
  a.q.batch_stride = a.q.head_stride = 3;  // never used for a size-1 dimension
  EXPECT_NO_THROW(host::validate_forward(a, Options{}));
}

TEST(Validation, RejectsEmptyDimensions) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.batch = 0; }, ErrorCode::kInvalidArgument,
                       {"forward", "shape.batch", ">= 1", "got 0"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.seqlen_q = 0; }, ErrorCode::kInvalidArgument,
                       {"shape.seqlen_q", "empty"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.seqlen_k = -3; }, ErrorCode::kInvalidArgument,
                       {"shape.seqlen_k", "got -3"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.heads_q = 0; }, ErrorCode::kInvalidArgument, {"shape.heads_q"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.heads_kv = 0; }, ErrorCode::kInvalidArgument, {"shape.heads_kv"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.head_dim = 0; }, ErrorCode::kInvalidArgument, {"shape.head_dim"});
}

TEST(Validation, RejectsUnsupportedHeadDim) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.head_dim = 96; }, ErrorCode::kNotSupported,
                       {"shape.head_dim", "64, 128, 256", "got 96"});
}

TEST(Validation, RejectsHeadsNotDivisible) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.heads_kv = 3; }, ErrorCode::kInvalidArgument,
                       {"shape.heads_kv", "divisor of heads_q = 8", "got 3"});
}

TEST(Validation, RejectsNullPointers) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.q.data = nullptr; }, ErrorCode::kInvalidArgument, {"'q'", "non-null"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.v.data = nullptr; }, ErrorCode::kInvalidArgument, {"'v'", "non-null"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.lse.data = nullptr; }, ErrorCode::kInvalidArgument, {"'lse'", "non-null"});
}

TEST(Validation, RejectsMisalignedPointers) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.k.data = static_cast<char*>(a.k.data) + 2; },
                       ErrorCode::kInvalidArgument, {"'k'", "16-byte aligned"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.lse.data = reinterpret_cast<float*>(reinterpret_cast<char*>(a.lse.data) + 2); },
                       ErrorCode::kInvalidArgument, {"'lse'", "4-byte aligned"});
}

TEST(Validation, RejectsNonContiguousLastDimension) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.out.dim_stride = 2; }, ErrorCode::kInvalidArgument,
                       {"'out'", "contiguous last", "got 2"});
}

TEST(Validation, RejectsBadStrides) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.q.seq_stride = 1028; }, ErrorCode::kInvalidArgument,
                       {"'q'", "seq_stride", "multiple of 8 elements", "got 1028"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.k.head_stride = -128; }, ErrorCode::kInvalidArgument,
                       {"'k'", "positive head_stride"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.v.batch_stride = int64_t{1} << 42; }, ErrorCode::kInvalidArgument,
                       {"'v'", "batch_stride", "2^40"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.lse.head_stride = 5; }, ErrorCode::kInvalidArgument,
                       {"'lse'", "head_stride >= seqlen_q = 100"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.lse.batch_stride = 0; }, ErrorCode::kInvalidArgument,
                       {"'lse'", "batch_stride >= heads_q * seqlen_q"});
}

TEST(Validation, RejectsSizesThatOverflowTileIndices) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.seqlen_q = int64_t{1} << 31; }, ErrorCode::kNotSupported,
                       {"shape.seqlen_q", "expected <="});
  expect_forward_error([](ForwardArgs& a, Options&) { a.shape.seqlen_k = int64_t{1} << 33; }, ErrorCode::kNotSupported,
                       {"shape.seqlen_k"});
  expect_forward_error([](ForwardArgs& a, Options&) {
    a.shape.batch = 1 << 16;
    a.shape.heads_q = 1 << 10;
    a.shape.heads_kv = 1;
    a.shape.seqlen_q = 1 << 12;
  }, ErrorCode::kNotSupported, {"'shape'", "overflows the 32-bit tile index"});
}

TEST(Validation, RejectsBadOptions) {
  expect_forward_error([](ForwardArgs&, Options& o) { o.softmax_scale = std::numeric_limits<float>::infinity(); },
                       ErrorCode::kInvalidArgument, {"options.softmax_scale", "finite"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.softmax_scale = 0.0f; }, ErrorCode::kInvalidArgument,
                       {"options.softmax_scale"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.max_ctas = -1; }, ErrorCode::kInvalidArgument, {"options.max_ctas"});
  // valid_forward is GQA 8/2: a chain may walk 1, 2 or 4 q-heads.
  expect_forward_error([](ForwardArgs&, Options& o) { o.q_heads_per_chain = 3; }, ErrorCode::kInvalidArgument,
                       {"options.q_heads_per_chain", "heads_q / heads_kv = 4", "got 3"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.q_heads_per_chain = -1; }, ErrorCode::kInvalidArgument,
                       {"options.q_heads_per_chain"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.schedule = static_cast<ScheduleKind>(42); },
                       ErrorCode::kInvalidArgument, {"options.schedule", "got 42"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.schedule = ScheduleKind::kAtomic; }, ErrorCode::kInvalidArgument,
                       {"options.schedule", "'atomic' is not deterministic"});
  expect_forward_error([](ForwardArgs&, Options& o) {
    o.deterministic = false;
    o.schedule = ScheduleKind::kShift;
  }, ErrorCode::kInvalidArgument, {"options.schedule", "'shift'", "deterministic is false"});
}

TEST(Validation, NamesBadWindowSoftcapAndSinks) {
  expect_forward_error([](ForwardArgs&, Options& o) { o.window_left = -2; }, ErrorCode::kInvalidArgument,
                       {"options.window_left", "got -2"});
  expect_forward_error([](ForwardArgs&, Options& o) { o.window_right = -5; }, ErrorCode::kInvalidArgument,
                       {"options.window_right"});
  for (float cap : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    expect_forward_error([cap](ForwardArgs&, Options& o) { o.softcap = cap; }, ErrorCode::kInvalidArgument,
                         {"options.softcap"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.sinks = reinterpret_cast<const float*>(0x100002); },
                       ErrorCode::kInvalidArgument, {"'sinks'", "aligned"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.sinks = static_cast<const float*>(a.out.data); },
                       ErrorCode::kInvalidArgument, {"'out'", "'sinks'"});
  // The forward ignores the schedule, so a window with a wave schedule is the backward's refusal alone.
  Options wave;
  wave.schedule = ScheduleKind::kShift;
  wave.window_left = 128;
  EXPECT_NO_THROW(host::validate_forward(valid_forward(), wave));
  expect_error([&] { host::validate_backward_problem("backward", valid_forward().shape, wave); },
               ErrorCode::kNotSupported, {"options.schedule", "'shift'", "sliding window"});
  Options windowed;
  windowed.window_left = 128;
  EXPECT_NO_THROW(host::validate_backward_problem("backward", valid_forward().shape, windowed));
  // causal with window_right alone is no window: the wave schedules still run.
  Options causal_right;
  causal_right.causal = true;
  causal_right.window_right = 7;
  causal_right.schedule = ScheduleKind::kSymmetricShift;
  EXPECT_FALSE(host::has_window(causal_right));
  EXPECT_NO_THROW(host::validate_backward_problem("backward", valid_forward().shape, causal_right));
  BackwardArgs b = valid_backward(Options{});
  b.dsinks = static_cast<float*>(fake_pointer(11));
  expect_error([&] { host::validate_backward(b, Options{}, b.workspace_bytes); }, ErrorCode::kInvalidArgument,
               {"'dsinks'", "'sinks' is null"});
  b.sinks = static_cast<const float*>(fake_pointer(12));
  EXPECT_NO_THROW(host::validate_backward(b, Options{}, b.workspace_bytes));
  b.dsinks = static_cast<float*>(b.dq.data);
  expect_error([&] { host::validate_backward(b, Options{}, b.workspace_bytes); }, ErrorCode::kInvalidArgument,
               {"'dsinks'", "overlaps"});
}

// Sinks are no score mod: every kernel takes them (host/validate.hpp).
TEST(Validation, ScoreModsAreWindowOrSoftcap) {
  Options o;
  EXPECT_FALSE(host::has_score_mods(o));
  o.causal = true;
  EXPECT_FALSE(host::has_score_mods(o));
  o.window_left = 0;
  EXPECT_TRUE(host::has_score_mods(o));
  Options cap;
  cap.softcap = 30.0f;
  EXPECT_TRUE(host::has_score_mods(cap));
  Options right;
  right.window_right = 0;  // non-causal (-1, 0) is causal spelled as a window: still a window request
  EXPECT_TRUE(host::has_window(right));
}

TEST(Validation, RefusesOutputsThatAliasInputsOrEachOther) {
  expect_forward_error([](ForwardArgs& a, Options&) { a.out.data = a.q.data; }, ErrorCode::kInvalidArgument,
                       {"forward", "'out'", "overlaps 'q'"});
  expect_forward_error([](ForwardArgs& a, Options&) { a.lse.data = static_cast<float*>(a.out.data) + 8; },
                       ErrorCode::kInvalidArgument, {"'lse'", "overlaps 'out'"});
  const Options options;
  BackwardArgs b = valid_backward(options);
  b.dk.data = static_cast<char*>(b.dq.data) + 64;
  expect_error([&] { host::validate_backward(b, options, b.workspace_bytes); }, ErrorCode::kInvalidArgument,
               {"backward", "'dk'", "overlaps 'dq'"});
  b = valid_backward(options);
  b.workspace = b.dout.data;
  expect_error([&] { host::validate_backward(b, options, b.workspace_bytes); }, ErrorCode::kInvalidArgument,
               {"'workspace'", "overlaps 'dout'"});
}

// A varlen batch of 3 sequences packed into 300 query and 400 key rows.
VarlenForwardArgs valid_forward_varlen() {
  VarlenForwardArgs a;
  a.shape = ProblemShape{3, 200, 250, 8, 2, 128};
  const int64_t d = a.shape.head_dim;
  a.lengths = VarlenLengths{300, 400, static_cast<const int32_t*>(fake_pointer(6)),
                            static_cast<const int32_t*>(fake_pointer(7)), nullptr, nullptr};
  a.q = TensorView{fake_pointer(1), 0, 8 * d, d, 1};
  a.k = TensorView{fake_pointer(2), 0, 2 * d, d, 1};
  a.v = TensorView{fake_pointer(3), 0, 2 * d, d, 1};
  a.out = TensorView{fake_pointer(4), 0, 8 * d, d, 1};
  a.lse = LseView{static_cast<float*>(fake_pointer(5)), 0, 300};
  return a;
}

TEST(Validation, ForwardVarlenNamesWhatItRefuses) {
  EXPECT_NO_THROW(host::validate_forward_varlen(valid_forward_varlen(), Options{}));
  auto expect_varlen_error = [](auto mutate, ErrorCode code, std::initializer_list<std::string> fragments) {
    VarlenForwardArgs a = valid_forward_varlen();
    mutate(a);
    expect_error([&] { host::validate_forward_varlen(a, Options{}); }, code, fragments);
  };
  using A = VarlenForwardArgs;
  expect_varlen_error([](A& a) { a.lengths.cu_seqlens_q = nullptr; }, ErrorCode::kInvalidArgument,
                      {"forward_varlen", "lengths.cu_seqlens_q", "batch + 1"});
  expect_varlen_error([](A& a) { a.lengths.cu_seqlens_k = nullptr; }, ErrorCode::kInvalidArgument,
                      {"lengths.cu_seqlens_k"});
  expect_varlen_error(
      [](A& a) { a.lengths.seqused_k = reinterpret_cast<const int32_t*>(static_cast<char*>(fake_pointer(8)) + 2); },
      ErrorCode::kInvalidArgument, {"lengths.seqused_k", "aligned"});
  expect_varlen_error([](A& a) { a.lengths.total_q = 0; }, ErrorCode::kInvalidArgument, {"lengths.total_q", ">= 1"});
  expect_varlen_error([](A& a) { a.shape.seqlen_k = 0; }, ErrorCode::kInvalidArgument, {"shape.seqlen_k"});
  expect_varlen_error([](A& a) { a.shape.head_dim = 96; }, ErrorCode::kNotSupported, {"shape.head_dim"});
  expect_varlen_error([](A& a) { a.lse.head_stride = 299; }, ErrorCode::kInvalidArgument, {"lse", "head_stride"});
  expect_varlen_error([](A& a) { a.q.seq_stride = 4; }, ErrorCode::kInvalidArgument, {"'q'", "seq_stride"});
  expect_varlen_error([](A& a) { a.lengths.total_k = int64_t{1} << 31; }, ErrorCode::kNotSupported,
                      {"lengths.total_k"});
  expect_varlen_error([](A& a) { a.out.data = a.q.data; }, ErrorCode::kInvalidArgument, {"'out'", "overlaps 'q'"});
  expect_varlen_error([](A& a) { a.lse.data = static_cast<float*>(fake_pointer(6)); },
                      ErrorCode::kInvalidArgument, {"'lse'", "overlaps 'lengths.cu_seqlens_q'"});
}

// The backward of valid_forward_varlen's batch, with a workspace of `bytes`.
VarlenBackwardArgs valid_backward_varlen(std::size_t bytes) {
  const VarlenForwardArgs f = valid_forward_varlen();
  VarlenBackwardArgs a;
  a.shape = f.shape;
  a.lengths = f.lengths;
  a.q = f.q, a.k = f.k, a.v = f.v, a.out = f.out, a.lse = f.lse;
  const int64_t d = a.shape.head_dim;
  a.dout = TensorView{fake_pointer(9), 0, 8 * d, d, 1};
  a.dq = TensorView{fake_pointer(10), 0, 8 * d, d, 1};
  a.dk = TensorView{fake_pointer(11), 0, 2 * d, d, 1};
  a.dv = TensorView{fake_pointer(12), 0, 2 * d, d, 1};
  a.workspace = fake_pointer(13);
  a.workspace_bytes = bytes;
  return a;
}

TEST(Validation, BackwardVarlenNamesWhatItRefuses) {
  const Options options;
  const VarlenForwardArgs f = valid_forward_varlen();
  const std::size_t bytes = host::plan_backward_varlen_workspace(f.shape, f.lengths, options).total_bytes;
  EXPECT_NO_THROW(host::validate_backward_varlen_problem("backward_varlen", f.shape, f.lengths, options));
  EXPECT_NO_THROW(host::validate_backward_varlen(valid_backward_varlen(bytes), bytes));
  for (ScheduleKind wave : {ScheduleKind::kShift, ScheduleKind::kSymmetricShift}) {
    Options o;
    o.schedule = wave;
    expect_error([&] { host::validate_backward_varlen_problem("backward_varlen", f.shape, f.lengths, o); },
                 ErrorCode::kNotSupported, {"backward_varlen", "options.schedule", std::string(to_string(wave))});
  }
  auto expect_args_error = [&](auto mutate, ErrorCode code, std::initializer_list<std::string> fragments) {
    VarlenBackwardArgs a = valid_backward_varlen(bytes);
    mutate(a);
    expect_error([&] { host::validate_backward_varlen(a, bytes); }, code, fragments);
  };
  using A = VarlenBackwardArgs;
  expect_args_error([](A& a) { a.workspace_bytes -= 1; }, ErrorCode::kInvalidArgument,
                    {"backward_varlen", "workspace_bytes", "backward_varlen_workspace_size"});
  expect_args_error([](A& a) { a.dq.data = nullptr; }, ErrorCode::kInvalidArgument, {"'dq'"});
  expect_args_error([](A& a) { a.dk.seq_stride = 4; }, ErrorCode::kInvalidArgument, {"'dk'", "seq_stride"});
  expect_args_error([](A& a) { a.dv.data = a.dout.data; }, ErrorCode::kInvalidArgument, {"'dv'", "overlaps 'dout'"});
  expect_args_error([](A& a) { a.dq.data = fake_pointer(6); }, ErrorCode::kInvalidArgument,
                    {"'dq'", "overlaps 'lengths.cu_seqlens_q'"});
  expect_args_error([](A& a) { a.workspace = a.q.data; }, ErrorCode::kInvalidArgument, {"'workspace'", "overlaps 'q'"});
}

TEST(WorkspacePlan, VarlenSizeDependsOnTotalsNotOnLengths) {
  const VarlenForwardArgs f = valid_forward_varlen();
  for (bool deterministic : {true, false}) {
    Options o;
    o.deterministic = deterministic;
    o.schedule = deterministic ? ScheduleKind::kAuto : ScheduleKind::kAtomic;
    const plan::BackwardWorkspace w = host::plan_backward_varlen_workspace(f.shape, f.lengths, o);
    // 300 query rows, 3 sequences, 64-row tiles (hdim 128): 300 / 64 + 3 slots per head.
    EXPECT_EQ(w.accum.q_per_head, 300 / 64 + 3);
    EXPECT_EQ(w.accum.kv_per_head, 400 / 128 + 3);
    EXPECT_EQ(w.dq_accum.bytes, std::size_t{8} * w.accum.q_per_head * 64 * 128 * sizeof(float));
    EXPECT_EQ(w.dq_counters.bytes, deterministic ? std::size_t{8} * w.accum.q_per_head * sizeof(int32_t) : 0u);
    EXPECT_EQ(w.dk_accum.bytes, std::size_t{2} * w.accum.kv_per_head * 128 * 128 * sizeof(float));
    EXPECT_EQ(w.sequence_order.bytes, plan::kSequenceOrderArrays * 3 * sizeof(int32_t));
    EXPECT_GT(w.unordered.bytes, 0u);
  }
}

TEST(WorkspacePlan, SequenceOrderArraysTileTheirSlice) {
  // 3 sequences: order [0, 3), run_first [3, 6), run_length [6, 9) = the slice's 9 int32.
  int32_t slice[plan::kSequenceOrderArrays * 3] = {};
  const plan::SequenceOrder<int32_t> arrays = plan::sequence_order_arrays(slice, 3);
  EXPECT_EQ(arrays.order, slice);
  EXPECT_EQ(arrays.run_first, slice + 3);
  EXPECT_EQ(arrays.run_length, slice + 6);
  EXPECT_EQ(arrays.run_length + 3, slice + plan::kSequenceOrderArrays * 3);
}

TEST(Overlap, InterleavedSlicesOfOnePackedBufferShareNoElement) {
  // q, k, v as slices of one (batch 2, seqlen 100, 3, heads 8, dim 64) buffer: same strides, 8*64 apart.
  auto slice = [](int64_t which) {
    return host::StridedView{reinterpret_cast<void*>(0x10000 + which * 8 * 64 * 2), 2, 4, {2, 100, 8, 64},
                             {100 * 3 * 8 * 64, 3 * 8 * 64, 64, 1}};
  };
  EXPECT_FALSE(host::views_overlap(slice(0), slice(1)));
  EXPECT_FALSE(host::views_overlap(slice(2), slice(0)));
  EXPECT_TRUE(host::views_overlap(slice(1), slice(1)));
  host::StridedView shifted = slice(1);
  shifted.data = static_cast<const char*>(shifted.data) + 2 * 3;  // three elements on: shares elements
  EXPECT_TRUE(host::views_overlap(slice(1), shifted));
  // Ranges that do not meet, and a view of another layout inside the range: conservative.
  host::StridedView far = slice(0);
  far.data = reinterpret_cast<void*>(0x10000000);
  EXPECT_FALSE(host::views_overlap(slice(0), far));
  host::StridedView other = slice(1);
  other.strides[2] = 128;
  EXPECT_TRUE(host::views_overlap(slice(0), other));
}

TEST(Validation, RefusesDevicesOtherThanComputeCapability90) {
  EXPECT_NO_THROW(host::validate_device("forward", 0, "NVIDIA H200", 9, 0));
  expect_error([] { host::validate_device("forward", 1, "NVIDIA A100-SXM4-80GB", 8, 0); }, ErrorCode::kNotSupported,
               {"dash_attn::forward", "device 1 (NVIDIA A100-SXM4-80GB)", "compute capability 8.0", "sm_90a"});
  // sm_90a code does not run on Blackwell (10.0) either.
  expect_error([] { host::validate_device("backward", 0, "NVIDIA B200", 10, 0); }, ErrorCode::kNotSupported,
               {"compute capability 10.0"});
}

TEST(Validation, BackwardChecksEveryTensorAndTheWorkspace) {
  const Options options;
  for (auto [name, member] : {std::pair{"'dout'", &BackwardArgs::dout}, std::pair{"'dq'", &BackwardArgs::dq},
                              std::pair{"'dk'", &BackwardArgs::dk}, std::pair{"'dv'", &BackwardArgs::dv}}) {
    BackwardArgs a = valid_backward(options);
    (a.*member).data = nullptr;
    expect_error([&] { host::validate_backward(a, options, a.workspace_bytes); }, ErrorCode::kInvalidArgument,
                 {"backward", name, "non-null"});
  }
  BackwardArgs small = valid_backward(options);
  const std::size_t required = small.workspace_bytes;
  small.workspace_bytes = required - 1;
  expect_error([&] { host::validate_backward(small, options, required); }, ErrorCode::kInvalidArgument,
               {"workspace_bytes", "backward_workspace_size()"});
  BackwardArgs null_workspace = valid_backward(options);
  null_workspace.workspace = nullptr;
  expect_error([&] { host::validate_backward(null_workspace, options, required); }, ErrorCode::kInvalidArgument,
               {"'workspace'", "non-null"});
  BackwardArgs misaligned = valid_backward(options);
  misaligned.workspace = static_cast<char*>(misaligned.workspace) + 16;
  expect_error([&] { host::validate_backward(misaligned, options, required); }, ErrorCode::kInvalidArgument,
               {"'workspace'", "256-byte"});
}

TEST(Validation, SoftmaxScaleDefaultsToInverseSqrtHeadDim) {
  ProblemShape s{1, 1, 1, 1, 1, 64};
  EXPECT_FLOAT_EQ(host::resolved_softmax_scale(s, Options{}), 0.125f);
  Options o;
  o.softmax_scale = 0.5f;
  EXPECT_FLOAT_EQ(host::resolved_softmax_scale(s, o), 0.5f);
}

TEST(WorkspacePlan, SizesEverySliceAndAlignsIt) {
  const ProblemShape s{2, 100, 130, 8, 2, 128};
  Options options;
  const plan::BackwardWorkspace w = host::plan_backward_workspace(s, options);
  EXPECT_EQ(w.tile.block_m, 64);
  EXPECT_EQ(w.q_tiles, 2);
  EXPECT_EQ(w.kv_tiles, 2);
  EXPECT_EQ(w.dq_accum.bytes, 2u * 8 * 128 * 128 * sizeof(float));
  EXPECT_EQ(w.dq_counters.bytes, 2u * 8 * 2 * sizeof(int32_t));
  EXPECT_GT(w.dk_accum.bytes, 0u);  // GQA accumulates dK/dV in fp32
  for (const plan::WorkspaceSlice* slice : {&w.dq_accum, &w.minus_lse, &w.minus_d, &w.dq_counters, &w.dk_accum,
                                            &w.dv_accum, &w.dkv_counters}) {
    EXPECT_EQ(slice->offset % 256, 0u);
    EXPECT_LE(slice->offset + slice->bytes, w.total_bytes);
  }
  options.deterministic = false;
  options.schedule = ScheduleKind::kAtomic;
  const plan::BackwardWorkspace atomic = host::plan_backward_workspace(s, options);
  EXPECT_EQ(atomic.dq_counters.bytes, 0u);
  EXPECT_EQ(atomic.dkv_counters.bytes, 0u);
}

// dK/dV accumulators exist only when chains walk part of their GQA group.
TEST(WorkspacePlan, DkvAccumulatorsOnlyForPartialGroupWalks) {
  const ProblemShape s{2, 256, 256, 32, 8, 128};
  Options options;
  EXPECT_EQ(host::backward_chain_heads(s, options), 4);  // the whole group: 32 / 4 = 8 chain heads
  const plan::BackwardWorkspace whole = host::plan_backward_workspace(s, options);
  EXPECT_EQ(whole.dk_accum.bytes, 0u);
  EXPECT_EQ(whole.dv_accum.bytes, 0u);
  EXPECT_EQ(whole.dkv_counters.bytes, 0u);
  options.q_heads_per_chain = 2;
  EXPECT_EQ(host::backward_chain_heads(s, options), 2);
  const plan::BackwardWorkspace half = host::plan_backward_workspace(s, options);
  EXPECT_EQ(half.dk_accum.bytes, std::size_t{2} * 8 * 2 * 128 * 128 * sizeof(float));
  EXPECT_GT(half.dkv_counters.bytes, 0u);
  const ProblemShape mha{2, 256, 256, 8, 8, 128};
  EXPECT_EQ(host::plan_backward_workspace(mha, Options{}).dk_accum.bytes, 0u);
}

TEST(Names, RoundTripEveryScheduleKind) {
  for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift,
                            ScheduleKind::kSymmetricShift, ScheduleKind::kAuto})
    EXPECT_EQ(parse_schedule_kind(to_string(kind)), kind);
  EXPECT_EQ(parse_schedule_kind("nope"), std::nullopt);
  EXPECT_EQ(to_string(DType::kBF16), "bf16");
  EXPECT_EQ(to_string(DType::kFP16), "fp16");
}

}  // namespace
}  // namespace dash_attn
