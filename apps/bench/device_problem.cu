#include "device_problem.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "dash_attn/cuda_check.hpp"

namespace dash_attn::bench {
namespace {

// Counter-based normal numbers (splitmix64 + Box-Muller): fresh data for any
// seed without a host round trip.
__device__ uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class Element>
__global__ void fill_normal(Element* data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = mix(seed ^ mix(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(bits >> 40) + 1.0f) / 16777217.0f;
    const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) / 16777216.0f;
    data[i] = Element(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

void fill(DType dtype, void* data, int64_t count, uint64_t seed) {
  if (dtype == DType::kBF16)
    fill_normal<<<1024, 256>>>(static_cast<__nv_bfloat16*>(data), count, seed);
  else
    fill_normal<<<1024, 256>>>(static_cast<__half*>(data), count, seed);
  DASH_CUDA_CHECK(cudaGetLastError());
}

void* allocate(std::size_t bytes) {
  void* p = nullptr;
  DASH_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)));
  return p;
}

TensorView dense(void* data, const ProblemShape& s, int64_t seqlen, int64_t heads) {
  return TensorView{data, seqlen * heads * s.head_dim, heads * s.head_dim, s.head_dim, 1};
}

}  // namespace

int64_t DeviceProblem::q_elements() const { return shape_.batch * shape_.seqlen_q * shape_.heads_q * shape_.head_dim; }
int64_t DeviceProblem::kv_elements() const { return shape_.batch * shape_.seqlen_k * shape_.heads_kv * shape_.head_dim; }

DeviceProblem::DeviceProblem(const ProblemShape& shape, DType dtype, uint64_t seed) : shape_(shape), dtype_(dtype) {
  const std::size_t q_bytes = q_elements() * 2, kv_bytes = kv_elements() * 2;
  q_ = allocate(q_bytes), out_ = allocate(q_bytes), dout_ = allocate(q_bytes), dq_ = allocate(q_bytes);
  k_ = allocate(kv_bytes), v_ = allocate(kv_bytes), dk_ = allocate(kv_bytes), dv_ = allocate(kv_bytes);
  lse_ = static_cast<float*>(allocate(shape.batch * shape.heads_q * shape.seqlen_q * sizeof(float)));
  fill(dtype, q_, q_elements(), seed * 4 + 0);
  fill(dtype, k_, kv_elements(), seed * 4 + 1);
  fill(dtype, v_, kv_elements(), seed * 4 + 2);
  fill(dtype, dout_, q_elements(), seed * 4 + 3);
  DASH_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceProblem::~DeviceProblem() {
  for (void* p : {q_, k_, v_, out_, dout_, dq_, dk_, dv_, static_cast<void*>(lse_), workspace_}) cudaFree(p);
}

ForwardArgs DeviceProblem::forward_args() const {
  ForwardArgs a;
  a.shape = shape_;
  a.dtype = dtype_;
  a.q = dense(q_, shape_, shape_.seqlen_q, shape_.heads_q);
  a.k = dense(k_, shape_, shape_.seqlen_k, shape_.heads_kv);
  a.v = dense(v_, shape_, shape_.seqlen_k, shape_.heads_kv);
  a.out = dense(out_, shape_, shape_.seqlen_q, shape_.heads_q);
  a.lse = LseView{lse_, shape_.heads_q * shape_.seqlen_q, shape_.seqlen_q};
  return a;
}

BackwardArgs DeviceProblem::backward_args(const Options& options) {
  const std::size_t needed = backward_workspace_size(shape_, options);
  if (needed > workspace_bytes_) {
    cudaFree(workspace_);
    workspace_ = allocate(needed);
    workspace_bytes_ = needed;
  }
  const ForwardArgs f = forward_args();
  BackwardArgs a;
  a.shape = shape_;
  a.dtype = dtype_;
  a.q = f.q, a.k = f.k, a.v = f.v, a.out = f.out, a.lse = f.lse;
  a.dout = dense(dout_, shape_, shape_.seqlen_q, shape_.heads_q);
  a.dq = dense(dq_, shape_, shape_.seqlen_q, shape_.heads_q);
  a.dk = dense(dk_, shape_, shape_.seqlen_k, shape_.heads_kv);
  a.dv = dense(dv_, shape_, shape_.seqlen_k, shape_.heads_kv);
  a.workspace = workspace_;
  a.workspace_bytes = workspace_bytes_;
  return a;
}

std::vector<uint16_t> DeviceProblem::download_bits(const void* device, int64_t elements) const {
  std::vector<uint16_t> bits(elements);
  DASH_CUDA_CHECK(cudaMemcpy(bits.data(), device, elements * 2, cudaMemcpyDeviceToHost));
  return bits;
}

std::vector<double> DeviceProblem::download(const void* device, int64_t elements) const {
  const std::vector<uint16_t> bits = download_bits(device, elements);
  std::vector<double> values(elements);
  for (int64_t i = 0; i < elements; ++i) {
    if (dtype_ == DType::kBF16) {
      __nv_bfloat16_raw raw;
      raw.x = bits[i];
      values[i] = static_cast<float>(__nv_bfloat16(raw));
    } else {
      __half_raw raw;
      raw.x = bits[i];
      values[i] = static_cast<float>(__half(raw));
    }
  }
  return values;
}

std::vector<float> DeviceProblem::download_lse() const {
  std::vector<float> lse(shape_.batch * shape_.heads_q * shape_.seqlen_q);
  DASH_CUDA_CHECK(cudaMemcpy(lse.data(), lse_, lse.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return lse;
}

}  // namespace dash_attn::bench
