// Comparison helpers shared by CPU and GPU tests: bitwise equality that says
// where the first difference is, and the FlashAttention-3 accuracy rule.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace dash_attn::testing {

// Row-major coordinates of a flat index in a tensor of the given dims.
inline std::string coordinate_of(int64_t index, const std::vector<int64_t>& dims) {
  std::vector<int64_t> coord(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    coord[i] = index % dims[i];
    index /= dims[i];
  }
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < coord.size(); ++i) out << (i ? ", " : "") << coord[i];
  out << ")";
  return out.str();
}

// Bitwise (0 ULP) equality of two arrays of any trivially copyable element.
// On failure: the number of differing elements and the first differing coordinate.
template <class T>
::testing::AssertionResult bitwise_equal(const std::vector<T>& expected, const std::vector<T>& actual,
                                         const std::vector<int64_t>& dims) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " != expected " << expected.size();
  int64_t differing = 0, first = -1;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::memcmp(&expected[i], &actual[i], sizeof(T)) != 0) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++differing;
    }
  }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " of " << expected.size()
                                       << " elements differ bitwise; first at " << coordinate_of(first, dims);
}

inline double max_abs_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a[i] - b[i]);
    if (std::isnan(e)) return e;
    worst = std::max(worst, e);
  }
  return worst;
}

// FlashAttention-3's rule: the kernel's max error against the fp64 reference
// is at most `factor` times the error of a naive implementation in the same
// precision, plus `atol`. NaN anywhere fails.
inline ::testing::AssertionResult within_fa3_tolerance(const std::vector<double>& kernel,
                                                       const std::vector<double>& naive,
                                                       const std::vector<double>& reference, double factor,
                                                       double atol) {
  const double kernel_error = max_abs_error(kernel, reference);
  const double naive_error = max_abs_error(naive, reference);
  const double bound = factor * naive_error + atol;
  if (kernel_error <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max error " << kernel_error << " > " << factor << " x naive error "
                                       << naive_error << " + atol " << atol << " = " << bound;
}

}  // namespace dash_attn::testing
