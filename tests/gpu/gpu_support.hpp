// GPU test support: skip without an sm_90 device, checked CUDA calls, device
// buffers poisoned with NaN before each kernel run, host<->device copies.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dash_attn/compiled_kernels.hpp"
#include "dash_attn/kernel_table.hpp"
#include "dash_attn/types.hpp"

#define DASH_TEST_CUDA(call)                                                          \
  do {                                                                                \
    const cudaError_t status_ = (call);                                               \
    ASSERT_EQ(status_, cudaSuccess) << #call << ": " << cudaGetErrorString(status_); \
  } while (0)

namespace dash_attn::testing {

// The kernel table rows this build compiled (-DDASH_KERNELS trims them): the
// GPU tests cover exactly these. score_mods: the rows with sliding windows,
// softcap and sinks (ScoreMods), else the Plain ones.
struct KernelRow {
  DType dtype;
  int64_t head_dim;
  bool score_mods = false;
};

inline std::vector<KernelRow> compiled_rows(Pass pass, bool score_mods = false) {
#define DASH_TEST_ROW(row_dtype, row_head_dim, row_mods) KernelRow{DType::k##row_dtype, row_head_dim, row_mods},
  const std::vector<KernelRow> forward{DASH_COMPILED_FORWARD_KERNELS(DASH_TEST_ROW)};
  const std::vector<KernelRow> backward{DASH_COMPILED_BACKWARD_KERNELS(DASH_TEST_ROW)};
#undef DASH_TEST_ROW
  std::vector<KernelRow> rows;
  for (const KernelRow& row : pass == Pass::kForward ? forward : backward)
    if (row.score_mods == score_mods) rows.push_back(row);
  return rows;
}

inline bool is_compiled(Pass pass, DType dtype, int64_t head_dim, bool score_mods = false) {
  for (const KernelRow& row : compiled_rows(pass, score_mods))
    if (row.dtype == dtype && row.head_dim == head_dim) return true;
  return false;
}

// The compiled head dims of one dtype, in table order.
inline std::vector<int64_t> compiled_head_dims(Pass pass, DType dtype, bool score_mods = false) {
  std::vector<int64_t> dims;
  for (const KernelRow& row : compiled_rows(pass, score_mods))
    if (row.dtype == dtype) dims.push_back(row.head_dim);
  return dims;
}

// Empty when an sm_90 device is present, otherwise the reason to skip.
inline std::string missing_sm90_reason() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "no CUDA device";
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot read device properties";
  if (prop.major != 9 || prop.minor != 0) return std::string("device ") + prop.name + " is not sm_90";
  return "";
}

#define DASH_REQUIRE_SM90()                                                          \
  do {                                                                               \
    const std::string reason_ = ::dash_attn::testing::missing_sm90_reason();         \
    if (!reason_.empty()) GTEST_SKIP() << "GPU test needs an sm_90 GPU: " << reason_; \
  } while (0)

// A test whose fixed problem needs the bf16/fp16 rows of one head_dim (both
// passes) skips on a build without them (-DDASH_KERNELS), instead of failing
// on the library's "not compiled" error.
#define DASH_REQUIRE_ROWS(dtype, head_dim)                                                           \
  do {                                                                                               \
    if (!::dash_attn::testing::is_compiled(::dash_attn::Pass::kForward, dtype, head_dim) || \
        !::dash_attn::testing::is_compiled(::dash_attn::Pass::kBackward, dtype, head_dim))  \
      GTEST_SKIP() << "needs the " << ::dash_attn::to_string(dtype) << " head_dim " << (head_dim)  \
                   << " kernel rows, not in this build (-DDASH_KERNELS)";                           \
  } while (0)

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (cudaMalloc(&data_, bytes()) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  T* get() const { return data_; }
  size_t bytes() const { return count_ * sizeof(T); }
  size_t size() const { return count_; }
  // 0xFF bytes: NaN for every float type, so an unwritten element fails any check.
  void poison() const {
    if (cudaMemset(data_, 0xFF, bytes()) != cudaSuccess) throw std::runtime_error("cudaMemset failed");
  }
  void upload(const std::vector<T>& host) const {
    if (cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("upload failed");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("download failed");
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// Fresh standard-normal values rounded to Element, and the same values as double.
template <class Element>
void random_tensor(std::mt19937_64& rng, size_t count, std::vector<Element>& device_values, std::vector<double>& exact) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  device_values.resize(count);
  exact.resize(count);
  for (size_t i = 0; i < count; ++i) {
    device_values[i] = Element(normal(rng));
    exact[i] = static_cast<double>(static_cast<float>(device_values[i]));
  }
}

template <class Element>
std::vector<double> to_double(const std::vector<Element>& values) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<double>(static_cast<float>(values[i]));
  return out;
}

// Dense (batch, seq, head, dim) view of a contiguous buffer.
inline TensorView dense_view(void* data, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorView{data, seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
}

}  // namespace dash_attn::testing
