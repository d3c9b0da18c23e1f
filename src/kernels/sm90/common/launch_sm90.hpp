// Host-side launch helpers shared by the passes.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "dash_attn/cuda_check.hpp"

namespace dash_attn::sm90 {

// Raises kKernel's dynamic shared memory limit to `bytes` on the current
// device, once per device (the attribute belongs to the device's context, so
// a process-wide "once" would leave a second GPU unconfigured).
template <auto kKernel>
void allow_dynamic_shared_memory(int bytes) {
  static std::atomic<uint64_t> configured{0};  // bit d: device d (devices 64+ are set on every call)
  int device = 0;
  DASH_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (configured.load(std::memory_order_acquire) & bit) != 0) return;
  DASH_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  configured.fetch_or(bit, std::memory_order_release);
}

}  // namespace dash_attn::sm90
