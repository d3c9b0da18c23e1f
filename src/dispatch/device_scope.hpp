// Makes the device that holds a call's tensors current on the calling thread
// for the length of the call, and refuses devices the sm90 kernels cannot run
// on, before anything is set up or launched. A thread that never used CUDA
// has no current context: the TMA descriptors created there failed with
// CUDA_ERROR_INVALID_CONTEXT (201) and the kernel then killed the process's
// context (H200, 2026-12-01, a fresh Python thread).
#pragma once

#include <initializer_list>

#include "dash_attn/api.hpp"

namespace dash_attn::dispatch {

struct NamedPointer {
  const char* name;
  const void* data;
};

class DeviceScope {
 public:
  // Every pointer must be device (or managed) memory of one device, and the
  // stream must belong to that device.
  DeviceScope(const char* function, std::initializer_list<NamedPointer> tensors, cudaStream_t stream);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

}  // namespace dash_attn::dispatch
