// The device's dense bf16 tensor-core ceiling, measured at the start of a
// dash-bench run: the TFLOPS column is also given as a percentage of it
// (../shared/design/BENCHMARKS.md: "ratio to the device ceiling, dense bf16
// wgmma measured on the same machine").
#pragma once

#include <string>

namespace dash_attn::bench {

struct WgmmaCeiling {
  double tflops = 0;   // from the median launch
  double median_ms = 0;
  int ctas = 0;
  std::string kernel;  // what was measured, one line
};

// One CTA per SM (it asks for all of an SM's shared memory), two warpgroups
// each issuing m64n256k16 bf16 x bf16 -> fp32 wgmma back to back with both
// operands in shared memory (random values: zeros would draw less power and
// clock higher than real data), 4 per commit group, one group in flight.
// FLOPs = 2 * 64 * 256 * 16 per instruction and warpgroup. Median of
// `launches` timed launches after two warm-up ones. Needs an sm_90 device;
// throws dash_attn::Error on a CUDA failure.
WgmmaCeiling measure_wgmma_ceiling(int launches = 5);

}  // namespace dash_attn::bench
