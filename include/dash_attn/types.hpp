// Logical description of an attention problem: shapes, tensor views, options.
// Host-only and CUDA-free so planning, validation, the model and the reference
// compile without a CUDA toolkit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dash_attn {

enum class DType { kBF16, kFP16 };

// How the deterministic backward orders the dQ (and GQA dK/dV) reductions.
// See docs/schedules.md for what each one does and its liveness requirement.
enum class ScheduleKind {
  kAtomic,          // unordered atomic adds: the non-deterministic baseline
  kFA3,             // FlashAttention-3's deterministic order
  kDescending,      // DASH: descending Q-tile iteration
  kShift,           // DASH: cyclic shift (full masks)
  kSymmetricShift,  // DASH: paired chains with two-phase folding (causal)
  kAuto,            // the measured best deterministic order for the shape (resolve.hpp)
};

std::string_view to_string(DType dtype);
std::string_view to_string(ScheduleKind kind);
// Parses the names printed by to_string; returns nullopt for an unknown name.
std::optional<ScheduleKind> parse_schedule_kind(std::string_view name);

// Shape of one attention call. Q is (batch, seqlen_q, heads_q, head_dim);
// K and V are (batch, seqlen_k, heads_kv, head_dim). heads_q % heads_kv == 0
// (GQA/MQA when heads_kv < heads_q).
struct ProblemShape {
  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;
};

// A 4-D (batch, seq, head, dim) tensor in device memory. Strides are in
// elements; the last dimension must be contiguous (stride 1), as TMA requires.
struct TensorView {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t seq_stride = 0;
  int64_t head_stride = 0;
  int64_t dim_stride = 1;
};

// Log-sum-exp per query row, fp32, natural log, laid out (batch, heads_q,
// seqlen_q) with seqlen_q contiguous, as FlashAttention 2/3 return it.
struct LseView {
  float* data = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
};

struct Options {
  bool causal = false;  // bottom-right aligned when seqlen_q != seqlen_k
  // Multiplies QK^T before the softmax; nullopt means 1/sqrt(head_dim).
  std::optional<float> softmax_scale;
  bool deterministic = true;
  ScheduleKind schedule = ScheduleKind::kAuto;
  // Upper bound on the backward grid (0: no cap). For tests of grid-size
  // invariance and for leaving SMs to concurrent kernels (like FA3's sm_margin).
  int max_ctas = 0;
  // SMs both passes leave to concurrent kernels (FA3's sm_margin, e.g. for
  // NCCL's during context parallelism): their grids use at most SMs - sm_margin.
  int sm_margin = 0;
  // Sliding window, FlashAttention's window_size = (left, right): query row r
  // sees key c iff r + offset - left <= c <= r + offset + right, with
  // offset = seqlen_k - seqlen_q (bottom-right aligned); -1 = unbounded on
  // that side. causal = true means right = 0 whatever window_right says.
  // Tiles outside the band are skipped, not masked (mask/mask_geometry.hpp).
  int window_left = -1;
  int window_right = -1;
  // > 0: every score s = softmax_scale * q.k becomes softcap * tanh(s / softcap)
  // before the mask and the softmax (FlashAttention's softcap). 0: off.
  float softcap = 0.0f;
  // Backward, GQA/MQA: q-heads of a KV head that one chain walks against its
  // KV tile (0: the library's choice, schedule::default_chain_heads; else a
  // divisor of heads_q / heads_kv). Walking the whole group keeps dK/dV in
  // registers (no fp32 dK/dV accumulator); fewer heads give more, shorter
  // chains. Deterministic results are bitwise stable for a given value, but
  // different values sum dK/dV in different orders.
  int q_heads_per_chain = 0;
};

struct ForwardArgs {
  ProblemShape shape;
  DType dtype = DType::kBF16;
  TensorView q, k, v;
  TensorView out;
  LseView lse;
  // Optional learnable attention sinks (FA4's learnable_sink, transformers'
  // s_aux): heads_q fp32 logits in device memory, null for none. sinks[h]
  // joins the softmax denominator of every row of q head h and carries no
  // value: lse = log(exp(sink) + sum_j exp(s_j)). Not scaled or capped.
  const float* sinks = nullptr;
};

// A variable-length batch in FlashAttention's varlen layout: the sequences
// are packed along the token dimension, Q (and out) as (total_q, heads_q,
// head_dim), K and V as (total_k, heads_kv, head_dim), and sequence b owns
// rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of Q and [cu_seqlens_k[b],
// cu_seqlens_k[b + 1]) of K and V. The int32 arrays live in device memory
// (batch + 1 entries; seqused_*: batch entries, optional, FA3's used lengths:
// sequence b then has min(seqused[b], its cu_seqlens length) rows). Their
// values cannot be checked without a host sync: the kernels clamp every
// sequence into [0, total), so a bad array gives wrong rows, never an access
// outside the tensors (docs/hardening.md).
struct VarlenLengths {
  int64_t total_q = 0;
  int64_t total_k = 0;
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;
};

// shape.batch is the number of sequences and shape.seqlen_q / seqlen_k are
// max_seqlen_q / max_seqlen_k (they size the grid; a longer sequence is still
// computed in full). The TensorViews' batch_stride is unused (rows are
// tokens); lse is (heads_q, total_q) as FlashAttention's varlen functions
// return it: row r of sequence b at head h is lse.data[h * head_stride +
// cu_seqlens_q[b] + r] (batch_stride unused).
struct VarlenForwardArgs {
  ProblemShape shape;
  VarlenLengths lengths;
  DType dtype = DType::kBF16;
  TensorView q, k, v;
  TensorView out;
  LseView lse;
  const float* sinks = nullptr;  // as ForwardArgs::sinks
};

struct BackwardArgs {
  ProblemShape shape;
  DType dtype = DType::kBF16;
  TensorView q, k, v, out, dout;
  LseView lse;
  // Optional gradient of the forward's lse (null data: zero), laid out like
  // lse. dS gains P * dlse, so it enters as D = rowsum(dO * O) - dlse.
  LseView dlse;
  TensorView dq, dk, dv;
  void* workspace = nullptr;  // backward_workspace_size() bytes, 256-byte aligned
  std::size_t workspace_bytes = 0;
  // The forward's sinks (null: none) and their gradient, heads_q fp32 in
  // device memory, overwritten (summed over batch and rows in a fixed order:
  // deterministic); dsinks may be null when the sinks need no gradient.
  const float* sinks = nullptr;
  float* dsinks = nullptr;
};

// The backward of a variable-length batch, in VarlenForwardArgs' layout:
// q, k, v, out, dout, dq, dk, dv packed (total, heads, head_dim), lse and
// dlse (heads_q, total_q). Each sequence's dq, dk, dv rows are written
// (zeros where it has no work: a sequence with keys but no queries gets
// dk = dv = 0); rows outside every sequence's used length are not written.
struct VarlenBackwardArgs {
  ProblemShape shape;  // batch = sequences, seqlen_q / seqlen_k = max_seqlen_q / max_seqlen_k
  VarlenLengths lengths;
  DType dtype = DType::kBF16;
  TensorView q, k, v, out, dout;
  LseView lse;
  LseView dlse;  // optional (null data: zero)
  TensorView dq, dk, dv;
  void* workspace = nullptr;  // backward_varlen_workspace_size() bytes, 256-byte aligned
  std::size_t workspace_bytes = 0;
  const float* sinks = nullptr;  // as BackwardArgs::sinks / dsinks
  float* dsinks = nullptr;
};

}  // namespace dash_attn
