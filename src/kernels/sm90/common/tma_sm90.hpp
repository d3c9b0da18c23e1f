// TMA helpers of both passes' launchers.
//
// CUTLASS's make_tma_copy reports a failed cuTensorMapEncodeTiled only on
// stderr and returns the zero-initialised descriptor, which a kernel then
// faults on (an illegal instruction that kills the CUDA context). An encoded
// descriptor always holds the tensor's address, so all-zero bytes mean failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dash_attn/error.hpp"

namespace dash_attn::sm90 {

// TMA wants every global stride to be a positive multiple of 16 bytes, also
// for dimensions of size 1 whose stride is never followed and the caller may
// leave arbitrary: those get `fallback`.
inline int64_t tma_stride(int64_t size, int64_t stride, int64_t fallback) { return size == 1 ? fallback : stride; }

template <class TmaCopy>
void check_tma_descriptor(const TmaCopy& tma, const char* pass, const char* tensor) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(tma.get_tma_descriptor());
  for (std::size_t i = 0; i < sizeof(*tma.get_tma_descriptor()); ++i)
    if (bytes[i] != 0) return;
  throw Error(ErrorCode::kCudaError, std::string("dash_attn::") + pass + ": the TMA descriptor of '" + tensor +
                                         "' could not be created (cuTensorMapEncodeTiled failed; its code is "
                                         "printed above); nothing was launched");
}

}  // namespace dash_attn::sm90
