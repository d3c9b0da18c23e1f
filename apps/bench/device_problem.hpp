// One attention problem in device memory for the benchmark: inputs filled with
// fresh normal values on the device, outputs, workspace, and the calls that
// run and time the library on it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "dash_attn/api.hpp"

namespace dash_attn::bench {

class DeviceProblem {
 public:
  DeviceProblem(const ProblemShape& shape, DType dtype, uint64_t seed);
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;
  ~DeviceProblem();

  ForwardArgs forward_args() const;
  BackwardArgs backward_args(const Options& options);  // sizes the workspace for options

  // Host copies (as double) for verification and bitwise checks.
  std::vector<double> download(const void* device, int64_t elements) const;
  std::vector<uint16_t> download_bits(const void* device, int64_t elements) const;
  std::vector<float> download_lse() const;

  const ProblemShape& shape() const { return shape_; }
  int64_t q_elements() const;
  int64_t kv_elements() const;

  void* q() const { return q_; }
  void* k() const { return k_; }
  void* v() const { return v_; }
  void* out() const { return out_; }
  void* dout() const { return dout_; }
  void* dq() const { return dq_; }
  void* dk() const { return dk_; }
  void* dv() const { return dv_; }

 private:
  ProblemShape shape_;
  DType dtype_;
  void *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *out_ = nullptr, *dout_ = nullptr;
  void *dq_ = nullptr, *dk_ = nullptr, *dv_ = nullptr;
  float* lse_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace dash_attn::bench
