// Shared by the score-mod GPU tests (test_score_mods.cu, issue 18): a case
// (dtype, shape, sliding window, softcap, sinks), its random inputs and the
// fp64 and naive same-precision references, a fixed-length runner of
// forward() and backward() with sinks and dsinks on poisoned outputs, a
// varlen runner of forward_varlen() and backward_varlen(), and the checks of
// FlashAttention-3's accuracy rule on out, lse, dq, dk, dv and dsinks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "backward_harness.hpp"
#include "common/compare.hpp"
#include "dash_attn/api.hpp"
#include "gpu_support.hpp"
#include "varlen_harness.hpp"

namespace dash_attn::testing {

// What a case does to the scores beyond scale * q.k.
struct ScoreMods {
  bool causal = false;
  int window_left = -1;  // Options::window_left / window_right; -1: unbounded
  int window_right = -1;
  float softcap = 0.0f;  // 0: off; integral in the tests (it names them)
  bool sinks = false;    // random sink logits in [-2, 4]
  // softmax_scale = scale_multiplier / sqrt(head_dim), integral: at 4 the
  // scores (about N(0, 16)) reach the bend of a small softcap's tanh.
  float scale_multiplier = 1.0f;
};

struct ModCase {
  DType dtype = DType::kBF16;
  ProblemShape shape;
  ScoreMods mods;
};

inline std::string mods_name(const ScoreMods& m) {
  std::ostringstream out;
  out << (m.causal ? "causal" : "full");
  if (m.window_left >= 0) out << "_wl" << m.window_left;
  if (m.window_right >= 0) out << "_wr" << m.window_right;
  if (m.softcap > 0.0f) out << "_cap" << static_cast<int>(m.softcap);
  if (m.scale_multiplier != 1.0f) out << "_x" << static_cast<int>(m.scale_multiplier);
  if (m.sinks) out << "_sinks";
  return out.str();
}

inline std::string mod_case_name(const ModCase& c) {
  const ProblemShape& s = c.shape;
  std::ostringstream out;
  out << to_string(c.dtype) << "_d" << s.head_dim << "_b" << s.batch << "_q" << s.seqlen_q << "_k" << s.seqlen_k
      << "_h" << s.heads_q << "x" << s.heads_kv << "_" << mods_name(c.mods);
  return out.str();
}

inline void PrintTo(const ModCase& c, std::ostream* out) { *out << mod_case_name(c); }

inline float mod_softmax_scale(const ScoreMods& m, int64_t head_dim) {
  return m.scale_multiplier / std::sqrt(static_cast<float>(head_dim));
}

// The library's options for the mods; the scale is passed explicitly so that
// the reference uses the very float the kernels see.
inline Options mod_options(const ScoreMods& m, float scale, ScheduleKind kind = ScheduleKind::kAuto,
                           int max_ctas = 0) {
  Options o;
  o.causal = m.causal;
  o.softmax_scale = scale;
  o.window_left = m.window_left;
  o.window_right = m.window_right;
  o.softcap = m.softcap;
  o.deterministic = kind != ScheduleKind::kAtomic;
  o.schedule = kind;
  o.max_ctas = max_ctas;
  return o;
}

// The same mods as the fp64 reference reads them: causal is the right bound 0.
inline reference::AttentionOptions reference_options(const ScoreMods& m, const std::vector<float>& sinks) {
  reference::AttentionOptions o;
  o.window_left = m.window_left;
  o.window_right = m.causal ? 0 : m.window_right;
  o.softcap = m.softcap;
  o.sinks = sinks.empty() ? nullptr : sinks.data();
  return o;
}


inline std::vector<float> random_sinks(std::mt19937_64& rng, int64_t heads) {
  std::uniform_real_distribution<float> logit(-2.0f, 4.0f);
  std::vector<float> sinks(heads);
  for (float& s : sinks) s = logit(rng);
  return sinks;
}

inline std::vector<uint16_t> to_bits(DType dtype, const std::vector<double>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = static_cast<float>(values[i]);
    if (dtype == DType::kBF16) {
      const __nv_bfloat16 y(x);
      std::memcpy(&bits[i], &y, 2);
    } else {
      const __half y(x);
      std::memcpy(&bits[i], &y, 2);
    }
  }
  return bits;
}

inline double max_magnitude(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

// A quarter of the dtype's epsilon (the atol of test_forward.cu / test_backward.cu).
inline double quarter_eps(DType dtype) { return dtype == DType::kBF16 ? 1e-3 : 1.25e-4; }

// Inputs of one case, dense (batch, seq, head, dim), exact in the dtype.
struct ModProblem {
  ModCase c;
  float scale = 0.0f;
  std::vector<double> q, k, v, dout;
  std::vector<float> sinks;  // heads_q logits; empty without sinks

  // Fresh random values (q, k, v, dout, then the sinks) from `seed`.
  ModProblem(const ModCase& mc, uint64_t seed) : c(mc), scale(mod_softmax_scale(mc.mods, mc.shape.head_dim)) {
    std::mt19937_64 rng(seed);
    q = random_exact(c.dtype, rng, reference::q_elements(c.shape));
    k = random_exact(c.dtype, rng, reference::kv_elements(c.shape));
    v = random_exact(c.dtype, rng, reference::kv_elements(c.shape));
    dout = random_exact(c.dtype, rng, reference::q_elements(c.shape));
    if (c.mods.sinks) sinks = random_sinks(rng, c.shape.heads_q);
  }
  // Given values (a varlen document alone).
  ModProblem(const ModCase& mc, std::vector<double> q_, std::vector<double> k_, std::vector<double> v_,
             std::vector<double> dout_, std::vector<float> sinks_)
      : c(mc), scale(mod_softmax_scale(mc.mods, mc.shape.head_dim)), q(std::move(q_)), k(std::move(k_)),
        v(std::move(v_)), dout(std::move(dout_)), sinks(std::move(sinks_)) {}

  reference::AttentionOptions ref_options() const { return reference_options(c.mods, sinks); }
  Options options(ScheduleKind kind = ScheduleKind::kAuto, int max_ctas = 0) const {
    return mod_options(c.mods, scale, kind, max_ctas);
  }
};

struct ModExpected {
  reference::ForwardResult exact_forward, naive_forward;
  reference::Gradients exact, naive;  // dsinks included with sinks
};

// The out a backward reads, as the kernels see it (rounded to the dtype).
inline std::vector<double> stored(DType dtype, const std::vector<double>& out) {
  std::vector<double> rounded(out.size());
  for (size_t i = 0; i < out.size(); ++i) rounded[i] = reference::round_to(dtype, out[i]);
  return rounded;
}

// The fp64 gradients a backward that reads `stored_out` should give: D from
// the stored out, FlashAttention's contract (attention_reference.hpp).
inline reference::Gradients exact_gradients(const ModProblem& p, const std::vector<double>& stored_out) {
  return reference::attention_backward(p.c.shape, p.ref_options(), p.scale, p.q, p.k, p.v, p.dout, &stored_out);
}

// The fp64 reference and the naive same-precision attention, forward and
// backward, each on its own thread; the exact gradients for a backward that
// reads the exact out rounded to the dtype (set_backward_inputs).
inline ModExpected expected_results(const ModProblem& p) {
  const reference::AttentionOptions o = p.ref_options();
  const ProblemShape s = p.c.shape;
  const DType dtype = p.c.dtype;
  const double scale = p.scale;
  auto exact_fwd = std::async(std::launch::async, [&] { return reference::attention_forward(s, o, scale, p.q, p.k, p.v); });
  auto naive_fwd =
      std::async(std::launch::async, [&] { return reference::naive_forward(dtype, s, o, scale, p.q, p.k, p.v); });
  auto naive_bwd = std::async(std::launch::async,
                              [&] { return reference::naive_backward(dtype, s, o, scale, p.q, p.k, p.v, p.dout); });
  reference::ForwardResult exact_forward = exact_fwd.get();
  reference::Gradients exact = exact_gradients(p, stored(dtype, exact_forward.out));
  return ModExpected{std::move(exact_forward), naive_fwd.get(), std::move(exact), naive_bwd.get()};
}

// out (dense, raw bits) and lse ((batch, heads_q, seqlen_q)) against the
// references. Rows that see no key must give out = 0 exactly and lse = -inf,
// or the sink's logit with sinks; the others follow FlashAttention-3's rule.
inline void expect_forward_accurate(const ModProblem& p, const ModExpected& e, const std::vector<uint16_t>& out_bits,
                                    const std::vector<float>& kernel_lse) {
  const ProblemShape& s = p.c.shape;
  const std::vector<double> out = bits_to_double(p.c.dtype, out_bits);
  ASSERT_EQ(out.size(), e.exact_forward.out.size());
  ASSERT_EQ(kernel_lse.size(), e.exact_forward.lse.size());
  std::vector<double> lse(kernel_lse.begin(), kernel_lse.end());
  std::vector<double> naive_lse = e.naive_forward.lse, exact_lse = e.exact_forward.lse;
  const mask::MaskGeometry rows = reference::row_mask(s.seqlen_q, s.seqlen_k, p.ref_options());
  int64_t empty_rows = 0, bad_rows = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        if (rows.col_end(static_cast<int>(i)) > rows.col_begin(static_cast<int>(i))) continue;
        ++empty_rows;
        const size_t at = (b * s.heads_q + h) * s.seqlen_q + i;
        const double* row_out = &out[((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim];
        const bool zero_out = std::all_of(row_out, row_out + s.head_dim, [](double x) { return x == 0.0; });
        const bool lse_ok = p.sinks.empty()
                                ? std::isinf(lse[at]) && lse[at] < 0
                                : std::abs(lse[at] - p.sinks[h]) <= 1e-5 * (1.0 + std::abs(p.sinks[h]));
        if ((!zero_out || !lse_ok) && bad_rows++ == 0)
          ADD_FAILURE() << "row (" << b << ", " << h << ", " << i << ") sees no key: out "
                        << (zero_out ? "is 0" : "is not 0") << ", lse " << lse[at] << " (expected "
                        << (p.sinks.empty() ? "-inf" : "the sink " + std::to_string(p.sinks[h])) << ")";
        lse[at] = naive_lse[at] = exact_lse[at] = 0.0;
      }
  EXPECT_EQ(bad_rows, 0) << "of " << empty_rows << " rows that see no key";
  EXPECT_TRUE(within_fa3_tolerance(out, e.naive_forward.out, e.exact_forward.out, 2.0, quarter_eps(p.c.dtype))) << "O";
  EXPECT_TRUE(within_fa3_tolerance(lse, naive_lse, exact_lse, 2.0, 1e-4)) << "LSE";
}

// Raw 16-bit gradients, dense, and the fp32 dsinks (empty without sinks).
struct ModGradients {
  std::vector<uint16_t> dq, dk, dv;
  std::vector<float> dsinks;
};

// dq, dk, dv by FlashAttention-3's rule, atol relative to each gradient's magnitude (as test_backward.cu).
inline void expect_gradients_accurate(DType dtype, const ModGradients& g, const reference::Gradients& exact,
                                      const reference::Gradients& naive) {
  const double eps = quarter_eps(dtype);
  const std::vector<double> dq = bits_to_double(dtype, g.dq), dk = bits_to_double(dtype, g.dk),
                            dv = bits_to_double(dtype, g.dv);
  EXPECT_TRUE(within_fa3_tolerance(dq, naive.dq, exact.dq, 2.0, eps * std::max(1.0, max_magnitude(exact.dq)))) << "dQ";
  EXPECT_TRUE(within_fa3_tolerance(dk, naive.dk, exact.dk, 2.0, eps * std::max(1.0, max_magnitude(exact.dk)))) << "dK";
  EXPECT_TRUE(within_fa3_tolerance(dv, naive.dv, exact.dv, 2.0, eps * std::max(1.0, max_magnitude(exact.dv)))) << "dV";
}

// dsinks (a sum over every row of a head) by the same rule, atol relative to its magnitude.
inline void expect_dsinks_accurate(DType dtype, const std::vector<float>& dsinks, const std::vector<double>& exact,
                                   const std::vector<double>& naive) {
  ASSERT_EQ(dsinks.size(), exact.size());
  const std::vector<double> got(dsinks.begin(), dsinks.end());
  EXPECT_TRUE(within_fa3_tolerance(got, naive, exact, 2.0, quarter_eps(dtype) * std::max(1.0, max_magnitude(exact))))
      << "dsinks";
}

// Device copies of one problem (dense layouts), the buffers forward() and
// backward() write, and the backward's out and lse inputs (the reference's
// or the last forward's).
class ModRunner {
 public:
  explicit ModRunner(const ModProblem& p)
      : p_(p.c), has_sinks_(!p.sinks.empty()), q_(p.q.size()), k_(p.k.size()), v_(p.k.size()),
        dout_(p.q.size()), out_(p.q.size()), dq_(p.q.size()), dk_(p.k.size()), dv_(p.k.size()),
        bwd_out_(p.q.size()), lse_(reference::lse_elements(p.c.shape)), bwd_lse_(lse_.size()),
        sinks_(std::max<size_t>(p.sinks.size(), 1)), dsinks_(sinks_.size()) {
    q_.upload(to_bits(p_.dtype, p.q));
    k_.upload(to_bits(p_.dtype, p.k));
    v_.upload(to_bits(p_.dtype, p.v));
    dout_.upload(to_bits(p_.dtype, p.dout));
    if (has_sinks_) sinks_.upload(p.sinks);
    poison_outputs();
    bwd_out_.poison();
    bwd_lse_.poison();
  }

  const ProblemShape& shape() const { return p_.shape; }

  ForwardArgs forward_args() const {
    ForwardArgs a;
    a.shape = p_.shape;
    a.dtype = p_.dtype;
    a.q = q_view(q_);
    a.k = k_view(k_);
    a.v = k_view(v_);
    a.out = q_view(out_);
    a.lse = lse_view(lse_);
    a.sinks = has_sinks_ ? sinks_.get() : nullptr;
    return a;
  }

  // Every argument of backward() with a workspace of backward_workspace_size(shape, o) bytes.
  BackwardArgs backward_args(const Options& o, bool with_dsinks = true) {
    const size_t bytes = backward_workspace_size(p_.shape, o);
    if (!workspace_ || workspace_->size() < bytes) workspace_ = std::make_unique<DeviceBuffer<char>>(std::max<size_t>(bytes, 1));
    BackwardArgs a;
    a.shape = p_.shape;
    a.dtype = p_.dtype;
    a.q = q_view(q_);
    a.k = k_view(k_);
    a.v = k_view(v_);
    a.out = q_view(bwd_out_);
    a.dout = q_view(dout_);
    a.lse = lse_view(bwd_lse_);
    a.dq = q_view(dq_);
    a.dk = k_view(dk_);
    a.dv = k_view(dv_);
    a.workspace = workspace_->get();
    a.workspace_bytes = workspace_->bytes();
    a.sinks = has_sinks_ ? sinks_.get() : nullptr;
    a.dsinks = has_sinks_ && with_dsinks ? dsinks_.get() : nullptr;
    return a;
  }

  // 0xFF bytes (NaN) in out, lse, dq, dk, dv and dsinks.
  void poison_outputs() const {
    for (const DeviceBuffer<uint16_t>* b : {&out_, &dq_, &dk_, &dv_}) b->poison();
    lse_.poison();
    dsinks_.poison();
  }
  // Whether every output still holds the poison (a refused call writes nothing).
  bool outputs_poisoned() const {
    const auto all_ff = [](const auto& host) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
      return std::all_of(bytes, bytes + host.size() * sizeof(host[0]), [](unsigned char x) { return x == 0xFF; });
    };
    return all_ff(out_.download()) && all_ff(dq_.download()) && all_ff(dk_.download()) && all_ff(dv_.download()) &&
           all_ff(lse_.download()) && all_ff(dsinks_.download());
  }

  // Poisons out and lse, runs forward() and waits.
  void forward(const Options& o) {
    out_.poison();
    lse_.poison();
    dash_attn::forward(forward_args(), o, nullptr);
    check(cudaDeviceSynchronize(), "forward");
  }
  std::vector<uint16_t> out_bits() const { return out_.download(); }
  std::vector<float> lse() const { return lse_.download(); }

  // The backward reads the reference's out (rounded to the dtype) and lse (fp32).
  void set_backward_inputs(const reference::ForwardResult& r) {
    bwd_out_.upload(to_bits(p_.dtype, r.out));
    bwd_lse_.upload(std::vector<float>(r.lse.begin(), r.lse.end()));
  }
  // The backward reads the last forward()'s out and lse.
  void use_forward_outputs() {
    check(cudaMemcpy(bwd_out_.get(), out_.get(), out_.bytes(), cudaMemcpyDeviceToDevice), "copy out");
    check(cudaMemcpy(bwd_lse_.get(), lse_.get(), lse_.bytes(), cudaMemcpyDeviceToDevice), "copy lse");
  }

  // Poisons dq, dk, dv, dsinks (and the workspace when asked), runs backward()
  // and waits under the watchdog. Throws what backward() throws.
  void backward(const Options& o, bool with_dsinks = true, bool poison_workspace = true) {
    const BackwardArgs a = backward_args(o, with_dsinks);
    for (const DeviceBuffer<uint16_t>* b : {&dq_, &dk_, &dv_}) b->poison();
    dsinks_.poison();
    if (poison_workspace) workspace_->poison();
    const Watchdog watchdog(30.0, "dash_attn::backward");
    dash_attn::backward(a, o, nullptr);
    check(cudaDeviceSynchronize(), "backward");
  }
  ModGradients gradients() const {
    ModGradients g{dq_.download(), dk_.download(), dv_.download(), {}};
    if (has_sinks_) g.dsinks = dsinks_.download();
    return g;
  }

 private:
  static void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
  TensorView q_view(const DeviceBuffer<uint16_t>& b) const {
    return dense_view(b.get(), p_.shape.seqlen_q, p_.shape.heads_q, p_.shape.head_dim);
  }
  TensorView k_view(const DeviceBuffer<uint16_t>& b) const {
    return dense_view(b.get(), p_.shape.seqlen_k, p_.shape.heads_kv, p_.shape.head_dim);
  }
  LseView lse_view(const DeviceBuffer<float>& b) const {
    return LseView{b.get(), p_.shape.heads_q * p_.shape.seqlen_q, p_.shape.seqlen_q};
  }

  ModCase p_;
  bool has_sinks_;
  DeviceBuffer<uint16_t> q_, k_, v_, dout_, out_, dq_, dk_, dv_, bwd_out_;
  DeviceBuffer<float> lse_, bwd_lse_, sinks_, dsinks_;
  std::unique_ptr<DeviceBuffer<char>> workspace_;
};

// What one varlen document got back, dense per document: out, dq (seq,
// heads_q, dim), dk, dv (seq, heads_kv, dim) as raw bits, lse (head, seq).
struct DocumentBits {
  std::vector<uint16_t> out, dq, dk, dv;
  std::vector<float> lse;
};

// One packing of documents (made with dout) and the sinks on the device:
// forward() runs forward_varlen into out and lse, backward() backward_varlen
// from them; both poison what they write first.
template <class Element>
class VarlenModRunner {
 public:
  VarlenModRunner(const std::vector<Document<Element>>& docs, const std::vector<int>& order, int64_t lead, Heads h,
                  bool use_seqused, const std::vector<float>& sinks)
      : docs_(&docs), h_(h), batch_(docs, order, lead, h, use_seqused), has_sinks_(!sinks.empty()),
        out_(batch_.q_elements()), dq_(batch_.q_elements()), dk_(batch_.k_elements()), dv_(batch_.k_elements()),
        lse_(batch_.lse_elements()), sinks_(std::max<size_t>(sinks.size(), 1)), dsinks_(sinks_.size()) {
    if (has_sinks_) sinks_.upload(sinks);
    for (const DeviceBuffer<uint16_t>* b : {&out_, &dq_, &dk_, &dv_}) b->poison();
    lse_.poison();
    dsinks_.poison();
  }

  const PackedBatch<Element>& batch() const { return batch_; }

  VarlenForwardArgs forward_args() const {
    VarlenForwardArgs a = batch_.forward_args(out_.get(), lse_.get());
    a.sinks = has_sinks_ ? sinks_.get() : nullptr;
    return a;
  }

  VarlenBackwardArgs backward_args(const Options& o) {
    const size_t bytes = backward_varlen_workspace_size(batch_.shape(), batch_.lengths(), o);
    if (!workspace_ || workspace_->size() < bytes) workspace_ = std::make_unique<DeviceBuffer<char>>(std::max<size_t>(bytes, 1));
    VarlenBackwardArgs a;
    a.shape = batch_.shape();
    a.lengths = batch_.lengths();
    a.dtype = dtype_of<Element>();
    a.q = batch_.q();
    a.k = batch_.k();
    a.v = batch_.v();
    a.out = batch_.packed_q(out_.get());
    a.dout = batch_.dout();
    a.lse = batch_.packed_lse(lse_.get());
    a.dq = batch_.packed_q(dq_.get());
    a.dk = batch_.packed_k(dk_.get());
    a.dv = batch_.packed_k(dv_.get());
    a.workspace = workspace_->get();
    a.workspace_bytes = workspace_->bytes();
    a.sinks = has_sinks_ ? sinks_.get() : nullptr;
    a.dsinks = has_sinks_ ? dsinks_.get() : nullptr;
    return a;
  }

  void forward(const Options& o) {
    out_.poison();
    lse_.poison();
    forward_varlen(forward_args(), o, nullptr);
    check(cudaDeviceSynchronize(), "forward_varlen");
  }

  void backward(const Options& o) {
    const VarlenBackwardArgs a = backward_args(o);
    for (const DeviceBuffer<uint16_t>* b : {&dq_, &dk_, &dv_}) b->poison();
    dsinks_.poison();
    workspace_->poison();
    const Watchdog watchdog(30.0, "dash_attn::backward_varlen");
    backward_varlen(a, o, nullptr);
    check(cudaDeviceSynchronize(), "backward_varlen");
  }

  std::vector<float> dsinks() const { return has_sinks_ ? dsinks_.download() : std::vector<float>{}; }

  // Rows of no sequence whose out, dq, dk or dv is not all zero.
  int64_t unowned_rows_wrong() const {
    const VarlenLayout& l = batch_.layout();
    return testing::unowned_rows_not_zero(out_.download(), l.owned_q, batch_.row_q()) +
           testing::unowned_rows_not_zero(dq_.download(), l.owned_q, batch_.row_q()) +
           testing::unowned_rows_not_zero(dk_.download(), l.owned_k, batch_.row_k()) +
           testing::unowned_rows_not_zero(dv_.download(), l.owned_k, batch_.row_k());
  }

  // Per document (indexed like docs): its rows of out, lse, dq, dk, dv.
  std::vector<DocumentBits> documents() const {
    const VarlenLayout& l = batch_.layout();
    const std::vector<uint16_t> out = out_.download(), dq = dq_.download(), dk = dk_.download(), dv = dv_.download();
    const std::vector<float> lse = lse_.download();
    std::vector<DocumentBits> r(docs_->size());
    for (size_t slot = 0; slot < l.order.size(); ++slot) {
      const Document<Element>& d = (*docs_)[l.order[slot]];
      DocumentBits& g = r[l.order[slot]];
      g.out = slot_bits(out, l.cu_q[slot], d.seqlen_q, batch_.row_q());
      g.dq = slot_bits(dq, l.cu_q[slot], d.seqlen_q, batch_.row_q());
      g.dk = slot_bits(dk, l.cu_k[slot], d.seqlen_k, batch_.row_k());
      g.dv = slot_bits(dv, l.cu_k[slot], d.seqlen_k, batch_.row_k());
      g.lse = slot_lse(lse, l.total_q, h_.q, l.cu_q[slot], d.seqlen_q);
    }
    return r;
  }

 private:
  static void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }

  const std::vector<Document<Element>>* docs_;
  Heads h_;
  PackedBatch<Element> batch_;
  bool has_sinks_;
  DeviceBuffer<uint16_t> out_, dq_, dk_, dv_;
  DeviceBuffer<float> lse_, sinks_, dsinks_;
  std::unique_ptr<DeviceBuffer<char>> workspace_;
};

}  // namespace dash_attn::testing
