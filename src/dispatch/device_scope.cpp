#include "device_scope.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <string>

#include "host/validate.hpp"
#include "dash_attn/cuda_check.hpp"

namespace dash_attn::dispatch {
namespace {

[[noreturn]] void fail_argument(const char* function, const char* name, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, std::string("dash_attn::") + function + ": argument '" + name + "': " + what);
}

int device_of(const char* function, const NamedPointer& tensor) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, tensor.data);
  if (status != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error behind for the caller's next call
    if (status != cudaErrorInvalidValue)  // no device, no driver: not the pointer's fault
      throw Error(ErrorCode::kCudaError, std::string("dash_attn::") + function + ": cudaPointerGetAttributes('" +
                                             tensor.name + "') failed: " + cudaGetErrorString(status));
    fail_argument(function, tensor.name, std::string("not a CUDA pointer (") + cudaGetErrorString(status) + ")");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    fail_argument(function, tensor.name, "expected device memory, got a host pointer");
  return attributes.device;
}

// Compute capabilities are asked once per device: 0 = not asked yet.
constexpr int kMaxDevices = 64;
std::array<std::atomic<int>, kMaxDevices> checked_capability{};

void check_capability(const char* function, int device) {
  if (device < kMaxDevices && checked_capability[device].load(std::memory_order_relaxed) != 0) return;
  int major = 0, minor = 0;
  DASH_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DASH_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  cudaDeviceProp properties{};
  if (!host::runs_sm90_kernels(major, minor)) DASH_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  host::validate_device(function, device, properties.name, major, minor);
  if (device < kMaxDevices) checked_capability[device].store(10 * major + minor, std::memory_order_relaxed);
}

}  // namespace

DeviceScope::DeviceScope(const char* function, std::initializer_list<NamedPointer> tensors, cudaStream_t stream) {
  const NamedPointer* first = nullptr;
  for (const NamedPointer& tensor : tensors) {
    if (tensor.data == nullptr) continue;  // validation names null pointers
    const int device = device_of(function, tensor);
    if (first == nullptr) {
      first = &tensor;
      device_ = device;
    } else if (device != device_) {
      fail_argument(function, tensor.name, "on device " + std::to_string(device) + ", expected device " +
                                               std::to_string(device_) + " like '" + first->name + "'");
    }
  }
  check_capability(function, device_);
  DASH_CUDA_CHECK(cudaGetDevice(&previous_));
  // Also when device_ is already the current device: cudaSetDevice makes its
  // primary context current, which a fresh thread lacks.
  DASH_CUDA_CHECK(cudaSetDevice(device_));
  if (stream != nullptr) {
    // A capturing stream refuses cudaStreamGetDevice (and the failed call
    // invalidates the capture): its device was checked when it began capturing.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    DASH_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    int stream_device = device_;
    if (capture == cudaStreamCaptureStatusNone) DASH_CUDA_CHECK(cudaStreamGetDevice(stream, &stream_device));
    if (stream_device != device_) {
      cudaSetDevice(previous_);
      fail_argument(function, "stream", "belongs to device " + std::to_string(stream_device) +
                                             ", the tensors are on device " + std::to_string(device_));
    }
  }
}

DeviceScope::~DeviceScope() {
  if (previous_ != device_) cudaSetDevice(previous_);  // a destructor cannot report; the call's own work is done
}

}  // namespace dash_attn::dispatch
