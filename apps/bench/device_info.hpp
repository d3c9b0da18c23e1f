// The device dash-bench runs on: whether it can run the sm_90a kernels at
// all, and what the results record about it (name, SMs, clock, driver and
// CUDA versions).
#pragma once

#include <string>

#include "bench/report.hpp"

namespace dash_attn::bench {

// Empty when device 0 is an sm_90 GPU the CUDA runtime can use; otherwise a
// sentence saying why not (no driver, no device, another architecture).
std::string sm90_unavailable_reason();

// Fills info's gpu, sms, sm_clock_mhz, driver_version, cuda_runtime and
// cuda_driver from device 0, leaving what cannot be read as it was.
void describe_device(RunInfo& info);

// The NVIDIA kernel driver version from the first line of
// /proc/driver/nvidia/version, e.g. "580.65.06"; "unknown" when unreadable.
std::string kernel_driver_version();

}  // namespace dash_attn::bench
