// The C ABI over the C++ API: converts the plain structs and codes (codes.hpp),
// turns exceptions into return codes and a per-thread message.
#include "dash_attn/c_api.h"

#include <string>

#include "codes.hpp"
#include "dash_attn/compiled_kernels.hpp"
#include "dash_attn/api.hpp"

namespace {

thread_local std::string last_error;

// A null struct pointer is a caller's bug that would otherwise crash here.
template <class T>
T& required(T* pointer, const char* function, const char* name) {
  if (pointer == nullptr)
    throw dash_attn::Error(dash_attn::ErrorCode::kInvalidArgument,
                           std::string(function) + ": argument '" + name + "': expected a non-null pointer");
  return *pointer;
}

dash_attn::ProblemShape to_shape(const DashShape& s) {
  return {s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, s.head_dim};
}

dash_attn::TensorView to_view(const DashTensor& t) {
  return {t.data, t.batch_stride, t.seq_stride, t.head_stride, t.dim_stride};
}

dash_attn::LseView to_lse(const DashLse& l) { return {l.data, l.batch_stride, l.head_stride}; }

dash_attn::VarlenLengths to_lengths(const DashVarlenLengths& l) {
  return {l.total_q, l.total_k, l.cu_seqlens_q, l.cu_seqlens_k, l.seqused_q, l.seqused_k};
}

// The tensors, dtype, workspace and sinks every backward entry point takes, into
// BackwardArgs or VarlenBackwardArgs (the same member names).
template <class Args>
void fill_backward_tensors(Args& a, const char* kFn, int32_t dtype, const DashTensor* q, const DashTensor* k,
                           const DashTensor* v, const DashTensor* out, const DashTensor* dout, const DashLse* lse,
                           const DashLse* dlse, const DashTensor* dq, const DashTensor* dk, const DashTensor* dv,
                           void* workspace, size_t workspace_bytes, const DashSinks* sinks) {
  a.dtype = dash_attn::capi::to_dtype(dtype);
  a.q = to_view(required(q, kFn, "q")), a.k = to_view(required(k, kFn, "k"));
  a.v = to_view(required(v, kFn, "v")), a.out = to_view(required(out, kFn, "out"));
  a.dout = to_view(required(dout, kFn, "dout"));
  a.lse = to_lse(required(lse, kFn, "lse"));
  if (dlse != nullptr) a.dlse = to_lse(*dlse);  // optional
  a.dq = to_view(required(dq, kFn, "dq")), a.dk = to_view(required(dk, kFn, "dk"));
  a.dv = to_view(required(dv, kFn, "dv"));
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  if (sinks != nullptr) a.sinks = sinks->sinks, a.dsinks = sinks->dsinks;  // optional
}

dash_attn::Options to_options(const DashOptions& o) {
  dash_attn::Options options;
  options.causal = o.causal != 0;
  if (o.has_softmax_scale) options.softmax_scale = o.softmax_scale;
  options.deterministic = o.deterministic != 0;
  options.schedule = dash_attn::capi::to_schedule(o.schedule);
  options.max_ctas = o.max_ctas;
  options.sm_margin = o.sm_margin;
  if (o.has_window) options.window_left = o.window_left, options.window_right = o.window_right;
  options.softcap = o.softcap;
  return options;
}

template <class Body>
int guarded(Body body) {
  try {
    body();
    return DASH_OK;
  } catch (const dash_attn::Error& e) {
    last_error = e.what();
    return dash_attn::capi::to_status(e.code());
  } catch (const std::exception& e) {
    last_error = e.what();
    return DASH_ERROR_CUDA;
  }
}

}  // namespace

extern "C" {

int dash_forward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                 const DashTensor* out, const DashLse* lse, const DashSinks* sinks, const DashOptions* options,
                 void* stream) {
  return guarded([&] {
    constexpr const char* kFn = "dash_forward";
    dash_attn::ForwardArgs a;
    a.shape = to_shape(required(shape, kFn, "shape"));
    a.dtype = dash_attn::capi::to_dtype(dtype);
    a.q = to_view(required(q, kFn, "q")), a.k = to_view(required(k, kFn, "k"));
    a.v = to_view(required(v, kFn, "v")), a.out = to_view(required(out, kFn, "out"));
    a.lse = to_lse(required(lse, kFn, "lse"));
    if (sinks != nullptr) a.sinks = sinks->sinks;
    dash_attn::forward(a, to_options(required(options, kFn, "options")), static_cast<cudaStream_t>(stream));
  });
}

int dash_forward_varlen(const DashShape* shape, const DashVarlenLengths* lengths, int32_t dtype, const DashTensor* q,
                        const DashTensor* k, const DashTensor* v, const DashTensor* out, const DashLse* lse,
                        const DashSinks* sinks, const DashOptions* options, void* stream) {
  return guarded([&] {
    constexpr const char* kFn = "dash_forward_varlen";
    dash_attn::VarlenForwardArgs a;
    a.shape = to_shape(required(shape, kFn, "shape"));
    a.lengths = to_lengths(required(lengths, kFn, "lengths"));
    a.dtype = dash_attn::capi::to_dtype(dtype);
    a.q = to_view(required(q, kFn, "q")), a.k = to_view(required(k, kFn, "k"));
    a.v = to_view(required(v, kFn, "v")), a.out = to_view(required(out, kFn, "out"));
    a.lse = to_lse(required(lse, kFn, "lse"));
    if (sinks != nullptr) a.sinks = sinks->sinks;
    dash_attn::forward_varlen(a, to_options(required(options, kFn, "options")), static_cast<cudaStream_t>(stream));
  });
}

int dash_backward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                  const DashTensor* out, const DashTensor* dout, const DashLse* lse, const DashLse* dlse,
                  const DashTensor* dq, const DashTensor* dk, const DashTensor* dv, void* workspace,
                  size_t workspace_bytes, const DashSinks* sinks, const DashOptions* options, void* stream) {
  return guarded([&] {
    constexpr const char* kFn = "dash_backward";
    dash_attn::BackwardArgs a;
    a.shape = to_shape(required(shape, kFn, "shape"));
    fill_backward_tensors(a, kFn, dtype, q, k, v, out, dout, lse, dlse, dq, dk, dv, workspace, workspace_bytes, sinks);
    dash_attn::backward(a, to_options(required(options, kFn, "options")), static_cast<cudaStream_t>(stream));
  });
}

int dash_backward_workspace_size(const DashShape* shape, const DashOptions* options, size_t* bytes) {
  return guarded([&] {
    constexpr const char* kFn = "dash_backward_workspace_size";
    required(bytes, kFn, "bytes") = dash_attn::backward_workspace_size(to_shape(required(shape, kFn, "shape")),
                                                to_options(required(options, kFn, "options")));
  });
}

int dash_backward_varlen(const DashShape* shape, const DashVarlenLengths* lengths, int32_t dtype, const DashTensor* q,
                         const DashTensor* k, const DashTensor* v, const DashTensor* out, const DashTensor* dout,
                         const DashLse* lse, const DashLse* dlse, const DashTensor* dq, const DashTensor* dk,
                         const DashTensor* dv, void* workspace, size_t workspace_bytes, const DashSinks* sinks,
                         const DashOptions* options, void* stream) {
  return guarded([&] {
    constexpr const char* kFn = "dash_backward_varlen";
    dash_attn::VarlenBackwardArgs a;
    a.shape = to_shape(required(shape, kFn, "shape"));
    a.lengths = to_lengths(required(lengths, kFn, "lengths"));
    fill_backward_tensors(a, kFn, dtype, q, k, v, out, dout, lse, dlse, dq, dk, dv, workspace, workspace_bytes, sinks);
    dash_attn::backward_varlen(a, to_options(required(options, kFn, "options")), static_cast<cudaStream_t>(stream));
  });
}

int dash_backward_varlen_workspace_size(const DashShape* shape, const DashVarlenLengths* lengths,
                                        const DashOptions* options, size_t* bytes) {
  return guarded([&] {
    constexpr const char* kFn = "dash_backward_varlen_workspace_size";
    required(bytes, kFn, "bytes") = dash_attn::backward_varlen_workspace_size(
        to_shape(required(shape, kFn, "shape")), to_lengths(required(lengths, kFn, "lengths")),
        to_options(required(options, kFn, "options")));
  });
}

const char* dash_last_error(void) { return last_error.c_str(); }

int32_t dash_abi_version(void) { return DASH_ATTN_ABI_VERSION; }

int32_t dash_compiled_kernels(DashKernelRow* rows, int32_t capacity) {
  constexpr int32_t kForward = DASH_PASS_FORWARD, kBackward = DASH_PASS_BACKWARD;
  constexpr int32_t kPlain = 0, kScoreMods = 1;
#define DASH_C_ROW(row_pass, row_dtype, row_head_dim, row_mods) \
  DashKernelRow{k##row_pass, DASH_DTYPE_##row_dtype, row_head_dim, k##row_mods},
  // The last entry only keeps the array non-empty.
  static constexpr DashKernelRow kRows[] = {DASH_COMPILED_KERNELS(DASH_C_ROW) DashKernelRow{-1, -1, -1, -1}};
#undef DASH_C_ROW
  const int32_t count = static_cast<int32_t>(sizeof(kRows) / sizeof(kRows[0])) - 1;
  for (int32_t i = 0; i < count && i < capacity && rows != nullptr; ++i) rows[i] = kRows[i];
  return count;
}

}  // extern "C"
