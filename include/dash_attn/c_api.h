/* C entry points of dash_attn, for foreign-function callers (the Python
 * package loads them with ctypes, so the library never links a framework).
 * Each function returns DASH_OK on success, otherwise one DASH_ERROR_* code,
 * and dash_last_error() returns the message of the calling thread's last
 * failure.
 *
 * Every code that crosses this boundary has an explicit value below, so a
 * reordered C++ enum cannot change what a caller's number means. Bump
 * DASH_ATTN_ABI_VERSION on any change of a struct layout, a function
 * signature or a constant's value; callers compare it with dash_abi_version()
 * before their first call. */
#ifndef DASH_ATTN_C_API_H
#define DASH_ATTN_C_API_H

/* The version of everything in this header, as one number (see above). */
#define DASH_ATTN_ABI_VERSION 5

#include <stddef.h>
#include <stdint.h>

#if defined(DASH_ATTN_BUILDING_C_API)
#define DASH_C_API __attribute__((visibility("default")))
#else
#define DASH_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
} DashShape;

typedef struct {
  void* data;
  int64_t batch_stride, seq_stride, head_stride, dim_stride; /* elements */
} DashTensor;

typedef struct {
  float* data;
  int64_t batch_stride, head_stride;
} DashLse;

typedef struct {
  int32_t causal;
  int32_t has_softmax_scale; /* 0: 1/sqrt(head_dim) */
  float softmax_scale;
  int32_t deterministic;
  int32_t schedule; /* a DASH_SCHEDULE_* code */
  int32_t max_ctas;
  int32_t sm_margin; /* SMs both passes leave free (FA3's sm_margin) */
  /* A sliding window (FlashAttention's window_size, -1: unbounded on that
   * side); has_window 0 ignores both, so a zeroed struct asks for none. */
  int32_t has_window;
  int32_t window_left, window_right;
  float softcap; /* > 0: softcap * tanh(s / softcap); 0: off */
} DashOptions;

/* Learnable attention sinks (dash_attn::ForwardArgs::sinks): heads_q fp32
 * logits in device memory. The compute functions take a pointer to this
 * struct, or null for no sinks. */
typedef struct {
  const float* sinks; /* null: no sinks */
  float* dsinks;      /* backward only: their gradient, heads_q fp32 (null: not computed) */
} DashSinks;

/* The dtype argument of dash_forward and dash_backward. */
enum { DASH_DTYPE_BF16 = 0, DASH_DTYPE_FP16 = 1 };

/* DashOptions.schedule: one per dash_attn::ScheduleKind. */
enum {
  DASH_SCHEDULE_ATOMIC = 0,
  DASH_SCHEDULE_FA3 = 1,
  DASH_SCHEDULE_DESCENDING = 2,
  DASH_SCHEDULE_SHIFT = 3,
  DASH_SCHEDULE_SYMMETRIC_SHIFT = 4,
  DASH_SCHEDULE_AUTO = 5
};

/* Return codes: DASH_OK, or one per dash_attn::ErrorCode. */
enum {
  DASH_OK = 0,
  DASH_ERROR_INVALID_ARGUMENT = 1,
  DASH_ERROR_NOT_SUPPORTED = 2,
  DASH_ERROR_NOT_IMPLEMENTED = 3,
  DASH_ERROR_UNSAFE_SCHEDULE = 4,
  DASH_ERROR_CUDA = 5
};

DASH_C_API int dash_forward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                 const DashTensor* out, const DashLse* lse, const DashSinks* sinks /* may be null */,
                 const DashOptions* options, void* stream);

/* A variable-length batch (dash_attn::VarlenLengths): int32 device arrays,
 * cu_seqlens_* with batch + 1 entries, seqused_* with batch entries or null. */
typedef struct {
  int64_t total_q, total_k;
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* seqused_q;
  const int32_t* seqused_k;
} DashVarlenLengths;

/* shape: batch = sequences, seqlen_q / seqlen_k = max_seqlen_q / max_seqlen_k;
 * q, k, v, out packed as (total, heads, head_dim) (batch_stride unused); lse
 * (heads_q, total_q). Rows no sequence owns get out = 0, lse = -inf. */
DASH_C_API int dash_forward_varlen(const DashShape* shape, const DashVarlenLengths* lengths, int32_t dtype,
                                   const DashTensor* q, const DashTensor* k, const DashTensor* v,
                                   const DashTensor* out, const DashLse* lse, const DashSinks* sinks,
                                   const DashOptions* options, void* stream);

DASH_C_API int dash_backward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                  const DashTensor* out, const DashTensor* dout, const DashLse* lse,
                  const DashLse* dlse /* may be null: no lse gradient */, const DashTensor* dq,
                  const DashTensor* dk, const DashTensor* dv, void* workspace, size_t workspace_bytes,
                  const DashSinks* sinks /* may be null */, const DashOptions* options, void* stream);

DASH_C_API int dash_backward_workspace_size(const DashShape* shape, const DashOptions* options, size_t* bytes);

/* The backward of a variable-length batch, in dash_forward_varlen's layout
 * (dout, dq, dk, dv packed like out, q, k, v; dlse like lse). Rows of dq, dk,
 * dv that no sequence owns are set to zero. */
DASH_C_API int dash_backward_varlen(const DashShape* shape, const DashVarlenLengths* lengths, int32_t dtype,
                                    const DashTensor* q, const DashTensor* k, const DashTensor* v,
                                    const DashTensor* out, const DashTensor* dout, const DashLse* lse,
                                    const DashLse* dlse /* may be null */, const DashTensor* dq, const DashTensor* dk,
                                    const DashTensor* dv, void* workspace, size_t workspace_bytes,
                                    const DashSinks* sinks, const DashOptions* options, void* stream);

DASH_C_API int dash_backward_varlen_workspace_size(const DashShape* shape, const DashVarlenLengths* lengths,
                                                   const DashOptions* options, size_t* bytes);

DASH_C_API const char* dash_last_error(void);

/* A row of the kernel table (include/dash_attn/kernel_table.hpp) this library compiled. */
enum { DASH_PASS_FORWARD = 0, DASH_PASS_BACKWARD = 1 };
typedef struct {
  int32_t pass;  /* a DASH_PASS_* code */
  int32_t dtype; /* a DASH_DTYPE_* code */
  int32_t head_dim;
  int32_t score_mods; /* 1: the row with sliding windows and softcap; 0: without (sinks: both) */
} DashKernelRow;

/* Writes up to `capacity` compiled rows into `rows` (may be null when
 * capacity is 0) and returns how many rows the library has. */
DASH_C_API int32_t dash_compiled_kernels(DashKernelRow* rows, int32_t capacity);

/* DASH_ATTN_ABI_VERSION of the header this library was built from. */
DASH_C_API int32_t dash_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DASH_ATTN_C_API_H */
