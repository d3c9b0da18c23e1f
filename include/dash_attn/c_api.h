/* C entry points of dash_attn, for foreign-function callers (the Python
 * package loads them with ctypes, so the library never links a framework).
 * Each function returns 0 on success, otherwise 1 + dash_attn::ErrorCode,
 * and dash_last_error() returns the message of the calling thread's last
 * failure. */
#ifndef DASH_ATTN_C_API_H
#define DASH_ATTN_C_API_H

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
  int32_t schedule; /* dash_attn::ScheduleKind */
  int32_t max_ctas;
} DashOptions;

enum { DASH_DTYPE_BF16 = 0, DASH_DTYPE_FP16 = 1 };

DASH_C_API int dash_forward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                 const DashTensor* out, const DashLse* lse, const DashOptions* options, void* stream);

DASH_C_API int dash_backward(const DashShape* shape, int32_t dtype, const DashTensor* q, const DashTensor* k, const DashTensor* v,
                  const DashTensor* out, const DashTensor* dout, const DashLse* lse, const DashTensor* dq,
                  const DashTensor* dk, const DashTensor* dv, void* workspace, size_t workspace_bytes,
                  const DashOptions* options, void* stream);

DASH_C_API int dash_backward_workspace_size(const DashShape* shape, const DashOptions* options, size_t* bytes);

DASH_C_API const char* dash_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DASH_ATTN_C_API_H */
