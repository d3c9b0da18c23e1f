// Shared by the backward GPU tests: random inputs with O and LSE from the
// fp64 reference forward, device tensors in dense or strided layouts, a run
// of dash_attn::backward under a watchdog, and the gradients read back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attention_reference.hpp"
#include "dash_attn/api.hpp"
#include "gpu_support.hpp"

namespace dash_attn::testing {

struct BackwardCase {
  DType dtype = DType::kBF16;
  ProblemShape shape;
  bool causal = false;
  ScheduleKind schedule = ScheduleKind::kAuto;
  bool deterministic = true;
  bool strided = false;  // heads-major tensors with padded rows instead of dense (batch, seq, head, dim)
};

inline std::string case_name(const BackwardCase& c) {
  const ProblemShape& s = c.shape;
  std::ostringstream out;
  out << to_string(c.dtype) << "_d" << s.head_dim << "_" << (c.causal ? "causal" : "full") << "_b" << s.batch << "_q"
      << s.seqlen_q << "_k" << s.seqlen_k << "_h" << s.heads_q << "x" << s.heads_kv << "_"
      << (c.deterministic ? to_string(c.schedule) : std::string_view("atomic")) << (c.strided ? "_strided" : "");
  return out.str();
}

// A hung deterministic kernel must fail its test, not stall the run. The
// deadline runs on its own thread: a hung kernel can also block the host inside
// a CUDA call (a lazy module load waits for the device), not only in a query.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!done_changed_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: %s did not finish within %.0f s; aborting the test process\n", what_.c_str(),
                     seconds);
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_one();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread thread_;
};

inline void wait_or_die(cudaStream_t stream, double seconds, const char* what) {
  const Watchdog watchdog(seconds, what);
  cudaStreamSynchronize(stream);
}

// Device-side helpers of the determinism tests (templates, so that every test
// unit may include them).

// differing[0] += elements where a != b; differing[1] = min differing index.
template <class T>
__global__ void count_differences(const T* a, const T* b, int64_t n, unsigned long long* differing) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if (a[i] != b[i]) {
      atomicAdd(&differing[0], 1ull);
      atomicMin(&differing[1], static_cast<unsigned long long>(i));
    }
}

// After a first runner.run(o): `reruns` more runs on the same workspace
// (outputs poisoned, workspace not), each compared on the device with the
// first result. `what` names the tensors in the failure message.
template <class Runner>
void expect_reruns_bitwise_equal(Runner& runner, const Options& o, int reruns, const char* what) {
  const DeviceBuffer<uint16_t> first_dq(runner.dq().size()), first_dk(runner.dk().size()), first_dv(runner.dv().size());
  DASH_TEST_CUDA(cudaMemcpy(first_dq.get(), runner.dq().get(), first_dq.bytes(), cudaMemcpyDeviceToDevice));
  DASH_TEST_CUDA(cudaMemcpy(first_dk.get(), runner.dk().get(), first_dk.bytes(), cudaMemcpyDeviceToDevice));
  DASH_TEST_CUDA(cudaMemcpy(first_dv.get(), runner.dv().get(), first_dv.bytes(), cudaMemcpyDeviceToDevice));
  DeviceBuffer<unsigned long long> differing(2 * reruns);
  std::vector<unsigned long long> init(2 * reruns);
  for (int r = 0; r < reruns; ++r) init[2 * r] = 0, init[2 * r + 1] = ~0ull;
  differing.upload(init);
  for (int r = 0; r < reruns; ++r) {
    runner.run(o, nullptr, /*poison_workspace=*/false);
    unsigned long long* slot = differing.get() + 2 * r;
    count_differences<<<264, 256>>>(first_dq.get(), runner.dq().get(), first_dq.size(), slot);
    count_differences<<<264, 256>>>(first_dk.get(), runner.dk().get(), first_dk.size(), slot);
    count_differences<<<264, 256>>>(first_dv.get(), runner.dv().get(), first_dv.size(), slot);
  }
  DASH_TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<unsigned long long> result = differing.download();
  int bad_runs = 0;
  for (int r = 0; r < reruns; ++r)
    if (result[2 * r] != 0 && bad_runs++ == 0)
      ADD_FAILURE() << "rerun " << r << ": " << result[2 * r] << " elements differ from run 0 (first flat index "
                    << result[2 * r + 1] << " of " << what << ")";
  EXPECT_EQ(bad_runs, 0) << "of " << reruns << " reruns";
}

// Spins on every SM it gets until *release is set (or ~1 s passes), keeping
// most SMs busy while a kernel under test runs beside it (launch it with
// enough dynamic shared memory that one CTA fills an SM).
template <class Flag>
__global__ void occupy_sms(const volatile Flag* release) {
  const long long start = clock64();
  while (*release == 0 && clock64() - start < 2'000'000'000ll) __nanosleep(1000);
}

// Where element (b, s, h, 0) of a tensor sits: dense, or heads-major with each
// row padded by 8 elements and each batch by 64 (all multiples of 16 bytes).
struct Placement {
  int64_t batch_stride, seq_stride, head_stride, elements;
  static Placement make(bool strided, int64_t batch, int64_t seqlen, int64_t heads, int64_t dim) {
    if (!strided) return {seqlen * heads * dim, heads * dim, dim, batch * seqlen * heads * dim};
    const int64_t row = dim + 8, head = seqlen * row, b = heads * head + 64;
    return {b, row, head, batch * b};
  }
  int64_t at(int64_t b, int64_t s, int64_t h) const { return b * batch_stride + s * seq_stride + h * head_stride; }
};

// Standard normal values that are exact in dtype.
inline std::vector<double> random_exact(DType dtype, std::mt19937_64& rng, int64_t count) {
  std::vector<double> exact;
  if (dtype == DType::kBF16) {
    std::vector<__nv_bfloat16> raw;
    random_tensor(rng, count, raw, exact);
  } else {
    std::vector<__half> raw;
    random_tensor(rng, count, raw, exact);
  }
  return exact;
}

// Inputs and reference results of one problem, dense (batch, seq, head, dim).
struct BackwardProblem {
  BackwardCase c;
  double scale = 0;
  std::vector<double> q, k, v, dout;
  reference::ForwardResult forward;  // fp64 O and LSE

  BackwardProblem(const BackwardCase& bc, uint64_t seed) : c(bc) {
    const ProblemShape& s = c.shape;
    scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    std::mt19937_64 rng(seed);
    q = random_exact(c.dtype, rng, reference::q_elements(s));
    k = random_exact(c.dtype, rng, reference::kv_elements(s));
    v = random_exact(c.dtype, rng, reference::kv_elements(s));
    dout = random_exact(c.dtype, rng, reference::q_elements(s));
    forward = reference::attention_forward(s, c.causal, scale, q, k, v);
  }

};

// Raw 16-bit gradients, dense (batch, seq, head, dim).
struct GradientBits {
  std::vector<uint16_t> dq, dk, dv;
};

inline std::vector<double> bits_to_double(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    if (dtype == DType::kBF16) {
      __nv_bfloat16 x;
      std::memcpy(&x, &bits[i], 2);
      out[i] = static_cast<double>(static_cast<float>(x));
    } else {
      __half x;
      std::memcpy(&x, &bits[i], 2);
      out[i] = static_cast<double>(static_cast<float>(x));
    }
  }
  return out;
}

// Device copies of a problem and the buffers backward() writes.
class BackwardRunner {
 public:
  explicit BackwardRunner(const BackwardProblem& p)
      : c_(p.c),
        pq_(Placement::make(c_.strided, c_.shape.batch, c_.shape.seqlen_q, c_.shape.heads_q, c_.shape.head_dim)),
        pk_(Placement::make(c_.strided, c_.shape.batch, c_.shape.seqlen_k, c_.shape.heads_kv, c_.shape.head_dim)),
        q_(pq_.elements), out_(pq_.elements), dout_(pq_.elements), dq_(pq_.elements),
        k_(pk_.elements), v_(pk_.elements), dk_(pk_.elements), dv_(pk_.elements),
        lse_(reference::lse_elements(c_.shape)) {
    upload(q_, pq_, p.q, c_.shape.seqlen_q, c_.shape.heads_q);
    upload(out_, pq_, p.forward.out, c_.shape.seqlen_q, c_.shape.heads_q);
    upload(dout_, pq_, p.dout, c_.shape.seqlen_q, c_.shape.heads_q);
    upload(k_, pk_, p.k, c_.shape.seqlen_k, c_.shape.heads_kv);
    upload(v_, pk_, p.v, c_.shape.seqlen_k, c_.shape.heads_kv);
    std::vector<float> lse(p.forward.lse.begin(), p.forward.lse.end());
    lse_.upload(lse);
  }

  Options options(int max_ctas = 0) const {
    Options o;
    o.causal = c_.causal;
    o.deterministic = c_.deterministic;
    o.schedule = c_.deterministic ? c_.schedule : ScheduleKind::kAtomic;
    o.max_ctas = max_ctas;
    return o;
  }

  // Poisons the outputs (and the workspace when asked), runs backward on
  // `stream` and waits under the watchdog. Throws what backward() throws.
  void run(const Options& o, cudaStream_t stream = nullptr, bool poison_workspace = true) {
    const size_t bytes = backward_workspace_size(c_.shape, o);
    if (!workspace_ || workspace_->size() < bytes) workspace_ = std::make_unique<DeviceBuffer<char>>(bytes);
    dq_.poison();
    dk_.poison();
    dv_.poison();
    if (poison_workspace) workspace_->poison();
    BackwardArgs a;
    a.shape = c_.shape;
    a.dtype = c_.dtype;
    a.q = view(q_, pq_);
    a.k = view(k_, pk_);
    a.v = view(v_, pk_);
    a.out = view(out_, pq_);
    a.dout = view(dout_, pq_);
    a.lse = LseView{lse_.get(), c_.shape.heads_q * c_.shape.seqlen_q, c_.shape.seqlen_q};
    a.dq = view(dq_, pq_);
    a.dk = view(dk_, pk_);
    a.dv = view(dv_, pk_);
    a.workspace = workspace_->get();
    a.workspace_bytes = workspace_->bytes();
    const Watchdog watchdog(30.0, "dash_attn::backward");
    backward(a, o, stream);
    cudaStreamSynchronize(stream);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(status));
  }

  GradientBits bits() const {
    return {dense(dq_, pq_, c_.shape.seqlen_q, c_.shape.heads_q), dense(dk_, pk_, c_.shape.seqlen_k, c_.shape.heads_kv),
            dense(dv_, pk_, c_.shape.seqlen_k, c_.shape.heads_kv)};
  }

  // The forward of the same inputs into `out` (laid out like q) and a dense `lse`.
  ForwardArgs forward_args(const DeviceBuffer<uint16_t>& out, const DeviceBuffer<float>& lse) const {
    ForwardArgs a;
    a.shape = c_.shape;
    a.dtype = c_.dtype;
    a.q = view(q_, pq_);
    a.k = view(k_, pk_);
    a.v = view(v_, pk_);
    a.out = view(out, pq_);
    a.lse = LseView{lse.get(), c_.shape.heads_q * c_.shape.seqlen_q, c_.shape.seqlen_q};
    return a;
  }
  size_t q_elements() const { return pq_.elements; }

  const DeviceBuffer<uint16_t>& dq() const { return dq_; }
  const DeviceBuffer<uint16_t>& dk() const { return dk_; }
  const DeviceBuffer<uint16_t>& dv() const { return dv_; }

 private:
  TensorView view(const DeviceBuffer<uint16_t>& b, const Placement& p) const {
    return TensorView{b.get(), p.batch_stride, p.seq_stride, p.head_stride, 1};
  }

  void upload(const DeviceBuffer<uint16_t>& buffer, const Placement& p, const std::vector<double>& dense_values,
              int64_t seqlen, int64_t heads) const {
    std::vector<uint16_t> host(p.elements, 0xFFFF);
    const int64_t d = c_.shape.head_dim;
    for (int64_t b = 0; b < c_.shape.batch; ++b)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < d; ++i) {
            const float x = static_cast<float>(dense_values[((b * seqlen + s) * heads + h) * d + i]);
            if (c_.dtype == DType::kBF16) {
              const __nv_bfloat16 y(x);
              std::memcpy(&host[p.at(b, s, h) + i], &y, 2);
            } else {
              const __half y(x);
              std::memcpy(&host[p.at(b, s, h) + i], &y, 2);
            }
          }
    buffer.upload(host);
  }

  std::vector<uint16_t> dense(const DeviceBuffer<uint16_t>& buffer, const Placement& p, int64_t seqlen,
                              int64_t heads) const {
    const std::vector<uint16_t> raw = buffer.download();
    const int64_t d = c_.shape.head_dim;
    std::vector<uint16_t> out(c_.shape.batch * seqlen * heads * d);
    for (int64_t b = 0; b < c_.shape.batch; ++b)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t h = 0; h < heads; ++h)
          std::memcpy(&out[((b * seqlen + s) * heads + h) * d], &raw[p.at(b, s, h)], d * 2);
    return out;
  }

  BackwardCase c_;
  Placement pq_, pk_;
  DeviceBuffer<uint16_t> q_, out_, dout_, dq_, k_, v_, dk_, dv_;
  DeviceBuffer<float> lse_;
  std::unique_ptr<DeviceBuffer<char>> workspace_;
};

}  // namespace dash_attn::testing
