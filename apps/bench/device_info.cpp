#include "bench/device_info.hpp"

#include <cuda_runtime_api.h>

#include <fstream>
#include <regex>

namespace dash_attn::bench {

std::string sm90_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
  if (count == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot read the properties of CUDA device 0";
  if (prop.major != 9 || prop.minor != 0)
    return std::string("device 0 (") + prop.name + ") is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
           ", the kernels need sm_90 (Hopper)";
  return "";
}

void describe_device(RunInfo& info) {
  cudaRuntimeGetVersion(&info.cuda_runtime);
  cudaDriverGetVersion(&info.cuda_driver);
  info.driver_version = kernel_driver_version();
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return;
  info.gpu = prop.name;
  info.sms = prop.multiProcessorCount;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) == cudaSuccess) info.sm_clock_mhz = khz / 1000;
}

std::string kernel_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build ..."
  static const std::regex version(R"(\s(\d+\.\d+(\.\d+)?)\s)");
  std::smatch match;
  return std::regex_search(line, match, version) ? match[1].str() : "unknown";
}

}  // namespace dash_attn::bench
