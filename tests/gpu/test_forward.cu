// The sm90 forward kernel through the public API against the fp64 reference
// (FlashAttention-3's rule: error <= 2 x the error of a naive same-precision
// attention + atol), on fresh random inputs with poisoned outputs, over
// dtypes, head dims, masks, odd and unequal lengths, GQA/MQA, strided
// layouts and batch * heads beyond the 65535-block grid limit. Each case runs
// twice and the reruns must agree bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "common/compare.hpp"
#include "dash_attn/api.hpp"
#include "gpu_support.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

// How the tensors sit in memory.
enum class Layout {
  kDense,   // separate (batch, seq, head, dim) tensors
  kPacked,  // q, k, v are slices of one (batch, seq, heads_q + 2 heads_kv, dim) tensor;
            // O is (batch, head, seq, dim); LSE rows are padded
};

struct ForwardCase {
  DType dtype;
  ProblemShape shape;
  bool causal;
  Layout layout = Layout::kDense;
};

std::string case_name(const ForwardCase& c) {
  const ProblemShape& s = c.shape;
  std::ostringstream out;
  out << to_string(c.dtype) << "_d" << s.head_dim << "_" << (c.causal ? "causal" : "full") << "_b" << s.batch << "_q"
      << s.seqlen_q << "_k" << s.seqlen_k << "_h" << s.heads_q << "x" << s.heads_kv
      << (c.layout == Layout::kPacked ? "_packed" : "");
  return out.str();
}

void PrintTo(const ForwardCase& c, std::ostream* out) { *out << case_name(c); }

// Element offsets of one tensor inside its buffer.
struct Placement {
  int64_t offset, batch_stride, seq_stride, head_stride;
  int64_t at(int64_t b, int64_t s, int64_t h) const { return offset + b * batch_stride + s * seq_stride + h * head_stride; }
  TensorView view(void* base, size_t element_bytes) const {
    return TensorView{static_cast<char*>(base) + offset * element_bytes, batch_stride, seq_stride, head_stride, 1};
  }
};

Placement dense_placement(int64_t seqlen, int64_t heads, int64_t dim) {
  return Placement{0, seqlen * heads * dim, heads * dim, dim};
}

struct Layouts {
  Placement q, k, v, out;
  int64_t qkv_elements, out_elements;
  int64_t lse_batch_stride, lse_head_stride, lse_elements;
};

Layouts make_layouts(const ForwardCase& c) {
  const ProblemShape& s = c.shape;
  const int64_t d = s.head_dim;
  Layouts l{};
  if (c.layout == Layout::kDense) {
    l.q = dense_placement(s.seqlen_q, s.heads_q, d);
    l.k = dense_placement(s.seqlen_k, s.heads_kv, d);
    l.v = l.k;
    l.out = l.q;
    l.qkv_elements = 0;
    l.out_elements = s.batch * s.seqlen_q * s.heads_q * d;
    l.lse_head_stride = s.seqlen_q;
  } else {
    const int64_t heads = s.heads_q + 2 * s.heads_kv;
    const int64_t seq_stride = heads * d, batch_stride = s.seqlen_q * seq_stride;
    l.q = Placement{0, batch_stride, seq_stride, d};
    l.k = Placement{s.heads_q * d, batch_stride, seq_stride, d};
    l.v = Placement{(s.heads_q + s.heads_kv) * d, batch_stride, seq_stride, d};
    l.qkv_elements = s.batch * batch_stride;
    l.out = Placement{0, s.heads_q * s.seqlen_q * d, d, s.seqlen_q * d};
    l.out_elements = s.batch * s.heads_q * s.seqlen_q * d;
    l.lse_head_stride = s.seqlen_q + 5;
  }
  l.lse_batch_stride = s.heads_q * l.lse_head_stride;
  l.lse_elements = s.batch * l.lse_batch_stride;
  return l;
}

// Fresh standard-normal tensor in a dense (batch, seq, head, dim) host copy,
// also scattered into `buffer` at `placement`.
template <class Element>
std::vector<double> fill_random(std::mt19937_64& rng, int64_t batch, int64_t seqlen, int64_t heads, int64_t dim,
                                const Placement& placement, std::vector<Element>& buffer) {
  std::vector<Element> values;
  std::vector<double> exact;
  testing::random_tensor(rng, batch * seqlen * heads * dim, values, exact);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seqlen; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < dim; ++i)
          buffer[placement.at(b, s, h) + i] = values[((b * seqlen + s) * heads + h) * dim + i];
  return exact;
}

struct Outputs {
  std::vector<double> out;  // dense (batch, seqlen_q, heads_q, dim)
  std::vector<double> lse;  // dense (batch, heads_q, seqlen_q)
  std::vector<uint16_t> out_bits;
  std::vector<float> lse_raw;
};

template <class Element>
void run_case(const ForwardCase& c, uint64_t seed) {
  const ProblemShape& s = c.shape;
  const Layouts l = make_layouts(c);
  std::mt19937_64 rng(seed);
  std::vector<double> q, k, v;
  std::vector<Element> qkv_host;
  std::vector<Element> q_host, k_host, v_host;
  const size_t bytes = sizeof(Element);
  std::unique_ptr<DeviceBuffer<Element>> qkv, qd, kd, vd;
  if (c.layout == Layout::kPacked) {
    qkv_host.assign(l.qkv_elements, Element(0.0f));
    q = fill_random(rng, s.batch, s.seqlen_q, s.heads_q, s.head_dim, l.q, qkv_host);
    k = fill_random(rng, s.batch, s.seqlen_k, s.heads_kv, s.head_dim, l.k, qkv_host);
    v = fill_random(rng, s.batch, s.seqlen_k, s.heads_kv, s.head_dim, l.v, qkv_host);
    qkv = std::make_unique<DeviceBuffer<Element>>(qkv_host.size());
    qkv->upload(qkv_host);
  } else {
    q_host.resize(s.batch * s.seqlen_q * s.heads_q * s.head_dim);
    k_host.resize(s.batch * s.seqlen_k * s.heads_kv * s.head_dim);
    v_host.resize(k_host.size());
    q = fill_random(rng, s.batch, s.seqlen_q, s.heads_q, s.head_dim, l.q, q_host);
    k = fill_random(rng, s.batch, s.seqlen_k, s.heads_kv, s.head_dim, l.k, k_host);
    v = fill_random(rng, s.batch, s.seqlen_k, s.heads_kv, s.head_dim, l.v, v_host);
    qd = std::make_unique<DeviceBuffer<Element>>(q_host.size());
    kd = std::make_unique<DeviceBuffer<Element>>(k_host.size());
    vd = std::make_unique<DeviceBuffer<Element>>(v_host.size());
    qd->upload(q_host);
    kd->upload(k_host);
    vd->upload(v_host);
  }
  DeviceBuffer<Element> out(l.out_elements);
  DeviceBuffer<float> lse(l.lse_elements);

  ForwardArgs a;
  a.shape = s;
  a.dtype = c.dtype;
  a.q = l.q.view(qkv ? qkv->get() : qd->get(), bytes);
  a.k = l.k.view(qkv ? qkv->get() : kd->get(), bytes);
  a.v = l.v.view(qkv ? qkv->get() : vd->get(), bytes);
  a.out = l.out.view(out.get(), bytes);
  a.lse = LseView{lse.get(), l.lse_batch_stride, l.lse_head_stride};
  Options options;
  options.causal = c.causal;

  auto run = [&]() {
    out.poison();
    lse.poison();
    forward(a, options, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<Element> out_raw = out.download();
    Outputs r;
    r.lse_raw = lse.download();
    r.out.resize(q.size());
    r.out_bits.resize(q.size());
    r.lse.resize(s.batch * s.heads_q * s.seqlen_q);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.seqlen_q; ++i)
        for (int64_t h = 0; h < s.heads_q; ++h) {
          for (int64_t d = 0; d < s.head_dim; ++d) {
            const Element x = out_raw[l.out.at(b, i, h) + d];
            const int64_t dense = ((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d;
            r.out[dense] = static_cast<double>(static_cast<float>(x));
            std::memcpy(&r.out_bits[dense], &x, sizeof x);
          }
          r.lse[(b * s.heads_q + h) * s.seqlen_q + i] = r.lse_raw[b * l.lse_batch_stride + h * l.lse_head_stride + i];
        }
    return r;
  };
  const Outputs first = run();
  const Outputs second = run();

  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const reference::ForwardResult exact = reference::attention_forward(s, c.causal, scale, q, k, v);
  const reference::ForwardResult naive = reference::naive_forward(c.dtype, s, c.causal, scale, q, k, v);
  const double atol = c.dtype == DType::kBF16 ? 1e-3 : 1.25e-4;  // a quarter of the dtype's epsilon
  EXPECT_TRUE(testing::within_fa3_tolerance(first.out, naive.out, exact.out, 2.0, atol)) << "O";

  // LSE: fully masked rows must be exactly -inf; the rest follow the same rule.
  std::vector<double> kernel_lse = first.lse, naive_lse = naive.lse, exact_lse = exact.lse;
  int64_t mismatched_empty_rows = 0;
  for (size_t i = 0; i < exact_lse.size(); ++i) {
    const bool empty = std::isinf(exact_lse[i]) && exact_lse[i] < 0;
    if (empty != (std::isinf(kernel_lse[i]) && kernel_lse[i] < 0)) ++mismatched_empty_rows;
    if (empty) kernel_lse[i] = naive_lse[i] = exact_lse[i] = 0.0;
  }
  EXPECT_EQ(mismatched_empty_rows, 0) << "rows whose LSE is -inf in one of kernel and reference only";
  EXPECT_TRUE(testing::within_fa3_tolerance(kernel_lse, naive_lse, exact_lse, 2.0, 1e-4)) << "LSE";

  EXPECT_TRUE(testing::bitwise_equal(first.out_bits, second.out_bits, {s.batch, s.seqlen_q, s.heads_q, s.head_dim}))
      << "O rerun";
  EXPECT_TRUE(testing::bitwise_equal(first.lse_raw, second.lse_raw, {static_cast<int64_t>(first.lse_raw.size())}))
      << "LSE rerun";
}

class ForwardAccuracy : public ::testing::TestWithParam<ForwardCase> {};

TEST_P(ForwardAccuracy, MatchesReferenceAndReruns) {
  DASH_REQUIRE_SM90();
  const ForwardCase& c = GetParam();
  const uint64_t seed = std::hash<std::string>{}(case_name(c));
  if (c.dtype == DType::kBF16)
    run_case<__nv_bfloat16>(c, seed);
  else
    run_case<__half>(c, seed);
}

std::vector<ForwardCase> coverage_cases() {
  std::vector<ForwardCase> cases;
  for (const testing::KernelRow& row : testing::compiled_rows(Pass::kForward))
    for (bool causal : {false, true}) {
      const DType dtype = row.dtype;
      const int64_t d = row.head_dim;
      // Two query tiles and three key tiles with tails, GQA 2:1.
      cases.push_back({dtype, ProblemShape{2, 257, 257, 4, 2, d}, causal});
      // seqlen_q > seqlen_k: under the causal mask the first rows see nothing.
      cases.push_back({dtype, ProblemShape{1, 300, 113, 2, 2, d}, causal});
      // seqlen_q < seqlen_k: bottom-right causal sees the whole prefix.
      cases.push_back({dtype, ProblemShape{1, 113, 300, 2, 1, d}, causal});
    }
  for (bool causal : {false, true}) {
    for (int64_t len : {1, 17, 113, 128, 129}) cases.push_back({DType::kBF16, ProblemShape{1, len, len, 1, 1, 128}, causal});
    cases.push_back({DType::kBF16, ProblemShape{1, 1, 257, 3, 3, 64}, causal});   // decoding-like
    cases.push_back({DType::kBF16, ProblemShape{1, 257, 1, 3, 3, 64}, causal});   // one key
    cases.push_back({DType::kBF16, ProblemShape{2, 200, 200, 8, 1, 128}, causal});  // MQA
    cases.push_back({DType::kBF16, ProblemShape{2, 150, 150, 4, 2, 64}, causal, Layout::kPacked});
    cases.push_back({DType::kFP16, ProblemShape{2, 150, 150, 4, 2, 256}, causal, Layout::kPacked});
  }
  // hdim 256's 80-key tile: key tile +- 1 and two tiles + 1, both masks,
  // seqlen_q below and above seqlen_k.
  for (bool causal : {false, true}) {
    for (int64_t len : {79, 80, 81, 161}) cases.push_back({DType::kBF16, ProblemShape{1, len, len, 2, 1, 256}, causal});
    cases.push_back({DType::kBF16, ProblemShape{1, 200, 241, 2, 2, 256}, causal});
    cases.push_back({DType::kFP16, ProblemShape{1, 241, 200, 2, 1, 256}, causal});
  }
  // hdim 64's tall tile (192 rows, three consumer warpgroups; tile_config.hpp):
  // tile +- 1 and two tiles + 1 row on the full mask; the causal mask runs it
  // from 2048 query rows on, with seqlen_q = seqlen_k, below and above.
  for (int64_t len : {191, 192, 193, 385}) cases.push_back({DType::kBF16, ProblemShape{1, len, len, 2, 1, 64}, false});
  cases.push_back({DType::kBF16, ProblemShape{1, 2100, 2100, 2, 1, 64}, true});
  cases.push_back({DType::kBF16, ProblemShape{1, 2049, 2300, 2, 2, 64}, true});
  cases.push_back({DType::kBF16, ProblemShape{1, 2300, 2049, 2, 2, 64}, true});
  // batch * heads = 70400 query tiles: more than a 65535-block grid dimension.
  cases.push_back({DType::kBF16, ProblemShape{1100, 8, 8, 64, 64, 64}, false});
  cases.push_back({DType::kBF16, ProblemShape{1100, 8, 8, 64, 16, 64}, true});
  // Rows this build did not compile (-DDASH_KERNELS) are not tested.
  cases.erase(std::remove_if(cases.begin(), cases.end(),
                             [](const ForwardCase& c) {
                               return !testing::is_compiled(Pass::kForward, c.dtype, c.shape.head_dim);
                             }),
              cases.end());
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Forward, ForwardAccuracy, ::testing::ValuesIn(coverage_cases()),
                         [](const ::testing::TestParamInfo<ForwardCase>& info) { return case_name(info.param); });

TEST(ForwardApi, RejectsNegativeSoftmaxScale) {
  DASH_REQUIRE_SM90();
  const ProblemShape s{1, 16, 16, 1, 1, 64};
  DeviceBuffer<__nv_bfloat16> q(s.seqlen_q * s.head_dim), out(q.size());
  DeviceBuffer<float> lse(s.seqlen_q);
  ForwardArgs a;
  a.shape = s;
  a.q = a.k = a.v = testing::dense_view(q.get(), s.seqlen_q, 1, s.head_dim);
  a.out = testing::dense_view(out.get(), s.seqlen_q, 1, s.head_dim);
  a.lse = LseView{lse.get(), s.seqlen_q, s.seqlen_q};
  Options options;
  options.softmax_scale = -0.125f;
  try {
    forward(a, options, nullptr);
    FAIL() << "expected dash_attn::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotSupported);
  }
}

}  // namespace
}  // namespace dash_attn
