#include "overlap.hpp"

#include <algorithm>
#include <cstdlib>

namespace dash_attn::host {
namespace {

struct Dim {
  int64_t size, stride;
};

// One past the last byte a view touches, from its first.
int64_t byte_span(const StridedView& v) {
  int64_t last = 0;
  for (int i = 0; i < v.rank; ++i) last += (v.sizes[i] - 1) * v.strides[i];
  return (last + 1) * v.element_bytes;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Is delta = sum_i c_i * stride_i for some |c_i| < size_i? dims by stride,
// largest first; each level leaves at most a few candidates for c_0 because
// the lower dimensions reach at most `reach` elements either way.
bool reachable(int64_t delta, const Dim* dims, int count) {
  if (count == 0) return delta == 0;
  int64_t reach = 0;
  for (int i = 1; i < count; ++i) reach += (dims[i].size - 1) * dims[i].stride;
  const int64_t stride = dims[0].stride, limit = dims[0].size - 1;
  const int64_t low = std::max(-limit, -floor_div(-(delta - reach), stride));
  const int64_t high = std::min(limit, floor_div(delta + reach, stride));
  if (high - low > 64) return true;  // not a nested layout: stay conservative
  for (int64_t c = low; c <= high; ++c)
    if (reachable(delta - c * stride, dims + 1, count - 1)) return true;
  return false;
}

bool same_layout(const StridedView& a, const StridedView& b) {
  if (a.element_bytes != b.element_bytes || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.sizes[i] != b.sizes[i] || (a.sizes[i] > 1 && a.strides[i] != b.strides[i])) return false;
  return true;
}

}  // namespace

bool views_overlap(const StridedView& a, const StridedView& b) {
  const auto begin_a = reinterpret_cast<std::intptr_t>(a.data), begin_b = reinterpret_cast<std::intptr_t>(b.data);
  if (begin_a + byte_span(a) <= begin_b || begin_b + byte_span(b) <= begin_a) return false;
  const int64_t delta_bytes = begin_b - begin_a;
  if (!same_layout(a, b) || delta_bytes % a.element_bytes != 0) return true;
  Dim dims[4];
  int count = 0;
  for (int i = 0; i < a.rank; ++i)
    if (a.sizes[i] > 1) dims[count++] = {a.sizes[i], a.strides[i]};
  std::sort(dims, dims + count, [](const Dim& x, const Dim& y) { return x.stride > y.stride; });
  return reachable(delta_bytes / a.element_bytes, dims, count);
}

}  // namespace dash_attn::host
