// Whether two strided views share a byte. An output that aliases an input or
// another output would race inside the kernels (one CTA still reads a Q tile
// that another has begun to overwrite with O), so validation refuses it.
#pragma once

#include <cstdint>

namespace dash_attn::host {

struct StridedView {
  const void* data = nullptr;
  int64_t element_bytes = 2;
  int rank = 0;
  int64_t sizes[4] = {};
  int64_t strides[4] = {};  // elements, positive where the size exceeds 1
};

// Exact for views with the same element size and strides (e.g. the q, k, v
// slices of one packed qkv buffer interleave without sharing an element);
// otherwise true whenever the byte ranges intersect.
bool views_overlap(const StridedView& a, const StridedView& b);

}  // namespace dash_attn::host
