// The varlen backward (backward_varlen). Out and lse come from the real
// forward (forward_varlen on the same packing); dq, dk, dv are poisoned before
// every call and rows of no sequence (lead padding, seqused slack, the tail)
// must come back zero, their gradient.
//  - Accuracy: every sequence against the fp64 reference run on it alone
//    (FlashAttention-3's rule, as test_backward.cu), on ragged batches with
//    lengths 0 (no queries; no keys; neither), 1, tile +- 1 (63/64/65,
//    127/128/129), seqlen_q != seqlen_k, one 2000-long sequence among short
//    ones; causal and full, GQA and MHA, hdim 64/128/256, bf16/fp16; schedules
//    atomic, fa3, descending, auto.
//  - Packing invariance (fa3, descending): a sequence's dq, dk, dv bits are the
//    same alone, in three other packings (order, offset, seqused, grid), and
//    from backward() on the sequence alone; with and without dlse.
//  - Determinism: 100 reruns of a ragged GQA causal batch, 1000 of a smaller
//    one, grid caps 1/3/17/all, a concurrent kernel holding most SMs.
//  - Validation: shift and symmetric_shift refused by name, a workspace one
//    byte short refused naming workspace_bytes, outputs untouched by refusals.
#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "backward_harness.hpp"
#include "common/compare.hpp"
#include "dash_attn/api.hpp"
#include "dash_attn/tile_config.hpp"
#include "gpu_support.hpp"
#include "varlen_harness.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;
using testing::Document;
using testing::Heads;
using testing::make_documents;
using testing::PackedBatch;
using Lengths = std::vector<std::pair<int64_t, int64_t>>;

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// What one document got back, dense per document: out, dq (seq, heads_q,
// dim), dk, dv (seq, heads_kv, dim) as raw bits, lse (head, seq).
struct DocumentGradients {
  std::vector<uint16_t> out, dq, dk, dv;
  std::vector<float> lse;
};

Options backward_options(bool causal, ScheduleKind kind, int max_ctas = 0, int sm_margin = 0) {
  Options o;
  o.causal = causal;
  o.deterministic = kind != ScheduleKind::kAtomic;
  o.schedule = kind;
  o.max_ctas = max_ctas;
  o.sm_margin = sm_margin;
  return o;
}

// One packing of documents (made with dout) on the device. The constructor
// runs forward_varlen into out and lse (rows of no sequence get out = 0,
// lse = -inf); run() poisons dq, dk, dv and runs backward_varlen. dlse, when given,
// is per document (head, seq), packed (heads_q, total_q) with NaN in rows of
// no sequence.
template <class Element>
class VarlenBackwardRunner {
 public:
  VarlenBackwardRunner(const std::vector<Document<Element>>& docs, const std::vector<int>& order, int64_t lead,
                       Heads h, bool causal, bool use_seqused, const std::vector<std::vector<float>>* dlse = nullptr,
                       int forward_sm_margin = 0)
      : docs_(&docs),
        h_(h),
        batch_(docs, order, lead, h, use_seqused),
        out_(batch_.q_elements()),
        dq_(batch_.q_elements()),
        dk_(batch_.k_elements()),
        dv_(batch_.k_elements()),
        lse_(batch_.lse_elements()),
        dlse_(dlse != nullptr ? batch_.lse_elements() : 1),
        has_dlse_(dlse != nullptr) {
    const testing::VarlenLayout& l = batch_.layout();
    if (has_dlse_) {
      std::vector<float> packed(batch_.lse_elements(), std::numeric_limits<float>::quiet_NaN());
      for (size_t slot = 0; slot < order.size(); ++slot) {
        const int64_t lq = docs[order[slot]].seqlen_q;
        const std::vector<float>& values = (*dlse)[order[slot]];
        for (int64_t head = 0; head < h.q; ++head)
          for (int64_t i = 0; i < lq; ++i) packed[head * l.total_q + l.cu_q[slot] + i] = values[head * lq + i];
      }
      dlse_.upload(packed);
    }
    out_.poison();
    lse_.poison();
    Options o;
    o.causal = causal;
    o.sm_margin = forward_sm_margin;
    forward_varlen(batch_.forward_args(out_.get(), lse_.get()), o, nullptr);
    check_cuda(cudaDeviceSynchronize(), "forward_varlen");
  }

  const PackedBatch<Element>& batch() const { return batch_; }

  size_t workspace_size(const Options& o) const {
    return backward_varlen_workspace_size(batch_.shape(), batch_.lengths(), o);
  }

  // Every argument of backward_varlen but the workspace.
  VarlenBackwardArgs args() const {
    VarlenBackwardArgs a;
    a.shape = batch_.shape();
    a.lengths = batch_.lengths();
    a.dtype = testing::dtype_of<Element>();
    a.q = batch_.q();
    a.k = batch_.k();
    a.v = batch_.v();
    a.out = batch_.packed_q(out_.get());
    a.dout = batch_.dout();
    a.lse = batch_.packed_lse(lse_.get());
    if (has_dlse_) a.dlse = batch_.packed_lse(dlse_.get());
    a.dq = batch_.packed_q(dq_.get());
    a.dk = batch_.packed_k(dk_.get());
    a.dv = batch_.packed_k(dv_.get());
    return a;
  }

  // 0xFF bytes (NaN) in dq, dk, dv, ordered on `stream` (a non-blocking stream
  // does not wait for the legacy default stream's memsets).
  void poison_outputs(cudaStream_t stream) const {
    for (const DeviceBuffer<uint16_t>* b : {&dq_, &dk_, &dv_})
      check_cuda(cudaMemsetAsync(b->get(), 0xFF, b->bytes(), stream), "poison");
  }

  // Poisons the outputs (and the workspace when asked), runs backward_varlen
  // on `stream` and waits under the watchdog. Throws what backward_varlen throws.
  void run(const Options& o, cudaStream_t stream = nullptr, bool poison_workspace = true) {
    const size_t bytes = workspace_size(o);
    if (!workspace_ || workspace_->size() < bytes)
      workspace_ = std::make_unique<DeviceBuffer<char>>(std::max<size_t>(bytes, 1));
    poison_outputs(stream);
    if (poison_workspace)
      check_cuda(cudaMemsetAsync(workspace_->get(), 0xFF, workspace_->bytes(), stream), "poison workspace");
    VarlenBackwardArgs a = args();
    a.workspace = workspace_->get();
    a.workspace_bytes = workspace_->bytes();
    const testing::Watchdog watchdog(30.0, "dash_attn::backward_varlen");
    backward_varlen(a, o, stream);
    check_cuda(cudaStreamSynchronize(stream), "backward_varlen");
    check_cuda(cudaGetLastError(), "backward_varlen");
  }

  // The packed outputs as they are on the device (poison included).
  std::vector<uint16_t> packed_dq() const { return dq_.download(); }
  std::vector<uint16_t> packed_dk() const { return dk_.download(); }
  std::vector<uint16_t> packed_dv() const { return dv_.download(); }
  const DeviceBuffer<uint16_t>& dq() const { return dq_; }
  const DeviceBuffer<uint16_t>& dk() const { return dk_; }
  const DeviceBuffer<uint16_t>& dv() const { return dv_; }

  // Rows of no sequence that are not all zero (their gradient), in dq, dk
  // and dv together: the outputs were poisoned before the call.
  int64_t unowned_rows_not_zero() const {
    const testing::VarlenLayout& l = batch_.layout();
    return testing::unowned_rows_not_zero(packed_dq(), l.owned_q, batch_.row_q()) +
           testing::unowned_rows_not_zero(packed_dk(), l.owned_k, batch_.row_k()) +
           testing::unowned_rows_not_zero(packed_dv(), l.owned_k, batch_.row_k());
  }

  // Per document (indexed like docs): its rows of out, lse, dq, dk, dv. Also
  // checks that the gradients of rows of no sequence are zero.
  std::vector<DocumentGradients> results() const {
    const testing::VarlenLayout& l = batch_.layout();
    const std::vector<uint16_t> out = out_.download(), dq = packed_dq(), dk = packed_dk(), dv = packed_dv();
    const std::vector<float> lse = lse_.download();
    EXPECT_EQ(testing::unowned_rows_not_zero(dq, l.owned_q, batch_.row_q()), 0)
        << "dQ rows of no sequence are not zero";
    EXPECT_EQ(testing::unowned_rows_not_zero(dk, l.owned_k, batch_.row_k()), 0)
        << "dK rows of no sequence are not zero";
    EXPECT_EQ(testing::unowned_rows_not_zero(dv, l.owned_k, batch_.row_k()), 0)
        << "dV rows of no sequence are not zero";
    std::vector<DocumentGradients> r(docs_->size());
    for (size_t slot = 0; slot < l.order.size(); ++slot) {
      const Document<Element>& d = (*docs_)[l.order[slot]];
      DocumentGradients& g = r[l.order[slot]];
      g.out = testing::slot_bits(out, l.cu_q[slot], d.seqlen_q, batch_.row_q());
      g.dq = testing::slot_bits(dq, l.cu_q[slot], d.seqlen_q, batch_.row_q());
      g.dk = testing::slot_bits(dk, l.cu_k[slot], d.seqlen_k, batch_.row_k());
      g.dv = testing::slot_bits(dv, l.cu_k[slot], d.seqlen_k, batch_.row_k());
      g.lse = testing::slot_lse(lse, l.total_q, h_.q, l.cu_q[slot], d.seqlen_q);
    }
    return r;
  }

 private:
  const std::vector<Document<Element>>* docs_;
  Heads h_;
  PackedBatch<Element> batch_;
  DeviceBuffer<uint16_t> out_, dq_, dk_, dv_;
  DeviceBuffer<float> lse_, dlse_;
  bool has_dlse_;
  std::unique_ptr<DeviceBuffer<char>> workspace_;
};

// forward() then backward() on one document alone (batch 1, dense), the
// fixed-length API. The document needs queries and keys (backward() takes
// no empty tensor).
template <class Element>
DocumentGradients run_fixed_alone(const Document<Element>& d, Heads h, const Options& o,
                                  const std::vector<float>* dlse = nullptr) {
  const int64_t nq = d.seqlen_q * h.q * h.dim, nk = d.seqlen_k * h.kv * h.dim, nl = h.q * d.seqlen_q;
  DeviceBuffer<Element> q(nq), k(nk), v(nk), dout(nq);
  DeviceBuffer<uint16_t> out(nq), dq(nq), dk(nk), dv(nk);
  DeviceBuffer<float> lse(nl), dlse_d(nl);
  q.upload(d.q), k.upload(d.k), v.upload(d.v), dout.upload(d.dout);
  if (dlse != nullptr) dlse_d.upload(*dlse);
  out.poison(), lse.poison(), dq.poison(), dk.poison(), dv.poison();
  const ProblemShape shape{1, d.seqlen_q, d.seqlen_k, h.q, h.kv, h.dim};
  ForwardArgs f;
  f.shape = shape;
  f.dtype = testing::dtype_of<Element>();
  f.q = testing::dense_view(q.get(), d.seqlen_q, h.q, h.dim);
  f.k = testing::dense_view(k.get(), d.seqlen_k, h.kv, h.dim);
  f.v = testing::dense_view(v.get(), d.seqlen_k, h.kv, h.dim);
  f.out = testing::dense_view(out.get(), d.seqlen_q, h.q, h.dim);
  f.lse = LseView{lse.get(), nl, d.seqlen_q};
  Options fo;
  fo.causal = o.causal;
  forward(f, fo, nullptr);

  BackwardArgs b;
  b.shape = shape;
  b.dtype = f.dtype;
  b.q = f.q, b.k = f.k, b.v = f.v, b.out = f.out, b.lse = f.lse;
  b.dout = testing::dense_view(dout.get(), d.seqlen_q, h.q, h.dim);
  if (dlse != nullptr) b.dlse = LseView{dlse_d.get(), nl, d.seqlen_q};
  b.dq = testing::dense_view(dq.get(), d.seqlen_q, h.q, h.dim);
  b.dk = testing::dense_view(dk.get(), d.seqlen_k, h.kv, h.dim);
  b.dv = testing::dense_view(dv.get(), d.seqlen_k, h.kv, h.dim);
  const DeviceBuffer<char> workspace(std::max<size_t>(backward_workspace_size(shape, o), 1));
  workspace.poison();
  b.workspace = workspace.get();
  b.workspace_bytes = workspace.bytes();
  {
    const testing::Watchdog watchdog(30.0, "dash_attn::backward on one document");
    backward(b, o, nullptr);
    check_cuda(cudaDeviceSynchronize(), "backward");
  }
  check_cuda(cudaGetLastError(), "backward");
  DocumentGradients r;
  r.out = out.download(), r.dq = dq.download(), r.dk = dk.download(), r.dv = dv.download();
  r.lse = lse.download();
  return r;
}

// ---------------------------------------------------------------- reference

// Heads [first, first + count) of a dense (seq, heads, dim) tensor, and back.
std::vector<double> heads_slice(const std::vector<double>& x, int64_t seq, int64_t heads, int64_t first, int64_t count,
                                int64_t dim) {
  std::vector<double> out(seq * count * dim);
  for (int64_t s = 0; s < seq; ++s)
    std::copy_n(x.begin() + (s * heads + first) * dim, count * dim, out.begin() + s * count * dim);
  return out;
}

void heads_scatter(const std::vector<double>& part, std::vector<double>& x, int64_t seq, int64_t heads, int64_t first,
                   int64_t count, int64_t dim) {
  for (int64_t s = 0; s < seq; ++s)
    std::copy_n(part.begin() + s * count * dim, count * dim, x.begin() + (s * heads + first) * dim);
}

struct ExpectedGradients {
  reference::Gradients exact, naive;  // fp64, and a naive backward in the dtype
};

// The fp64 reference and the naive same-precision backward of each document
// alone (empty documents: zeros). Each (document, KV head) runs on its own
// thread: a KV head and its group of query heads depend on no other head, so
// the split changes no value of either.
template <class Element>
std::vector<ExpectedGradients> expected_gradients(const std::vector<Document<Element>>& docs, Heads h, bool causal) {
  const int64_t group = h.q / h.kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(h.dim));
  const DType dtype = testing::dtype_of<Element>();
  using Pair = std::pair<reference::Gradients, reference::Gradients>;
  struct Job {
    size_t doc;
    int64_t kv_head;
    std::future<Pair> result;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < docs.size(); ++i) {
    const Document<Element>& d = docs[i];
    if (d.seqlen_q == 0 || d.seqlen_k == 0) continue;
    for (int64_t hk = 0; hk < h.kv; ++hk)
      jobs.push_back({i, hk, std::async(std::launch::async, [&d, h, hk, group, scale, dtype, causal] {
                        const ProblemShape s{1, d.seqlen_q, d.seqlen_k, group, 1, h.dim};
                        const std::vector<double> q = heads_slice(d.q_exact, d.seqlen_q, h.q, hk * group, group, h.dim);
                        const std::vector<double> dout =
                            heads_slice(d.dout_exact, d.seqlen_q, h.q, hk * group, group, h.dim);
                        const std::vector<double> k = heads_slice(d.k_exact, d.seqlen_k, h.kv, hk, 1, h.dim);
                        const std::vector<double> v = heads_slice(d.v_exact, d.seqlen_k, h.kv, hk, 1, h.dim);
                        return Pair{reference::attention_backward(s, causal, scale, q, k, v, dout),
                                    reference::naive_backward(dtype, s, causal, scale, q, k, v, dout)};
                      })});
  }
  std::vector<ExpectedGradients> out(docs.size());
  for (size_t i = 0; i < docs.size(); ++i)
    for (reference::Gradients* g : {&out[i].exact, &out[i].naive}) {
      g->dq.assign(docs[i].seqlen_q * h.q * h.dim, 0.0);
      g->dk.assign(docs[i].seqlen_k * h.kv * h.dim, 0.0);
      g->dv.assign(docs[i].seqlen_k * h.kv * h.dim, 0.0);
    }
  for (Job& job : jobs) {
    const Pair part = job.result.get();
    const Document<Element>& d = docs[job.doc];
    ExpectedGradients& e = out[job.doc];
    for (const auto& [from, to] : {std::pair{&part.first, &e.exact}, std::pair{&part.second, &e.naive}}) {
      heads_scatter(from->dq, to->dq, d.seqlen_q, h.q, job.kv_head * group, group, h.dim);
      heads_scatter(from->dk, to->dk, d.seqlen_k, h.kv, job.kv_head, 1, h.dim);
      heads_scatter(from->dv, to->dv, d.seqlen_k, h.kv, job.kv_head, 1, h.dim);
    }
  }
  return out;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

int64_t count_if_not(const std::vector<double>& x, bool (*ok)(double)) {
  return std::count_if(x.begin(), x.end(), [ok](double v) { return !ok(v); });
}

// One document's gradients against its reference: finite everywhere, exact
// zeros where the document has no work (no queries or no keys), otherwise
// within FlashAttention-3's rule (as test_backward.cu).
void expect_accurate(DType dtype, const DocumentGradients& got, const ExpectedGradients& want, int64_t seqlen_q,
                     int64_t seqlen_k) {
  const std::vector<double> dq = testing::bits_to_double(dtype, got.dq), dk = testing::bits_to_double(dtype, got.dk),
                            dv = testing::bits_to_double(dtype, got.dv);
  ASSERT_EQ(dq.size(), want.exact.dq.size());
  ASSERT_EQ(dk.size(), want.exact.dk.size());
  const auto finite = [](double v) { return std::isfinite(v); };
  const auto zero = [](double v) { return v == 0.0; };
  EXPECT_EQ(count_if_not(dq, finite), 0) << "non-finite dQ elements";
  EXPECT_EQ(count_if_not(dk, finite), 0) << "non-finite dK elements";
  EXPECT_EQ(count_if_not(dv, finite), 0) << "non-finite dV elements";
  if (seqlen_q == 0 || seqlen_k == 0) {  // no work: dq (no keys) or dk, dv (no queries) are zeros
    EXPECT_EQ(count_if_not(dq, zero), 0) << "dQ of a sequence without keys is not 0";
    EXPECT_EQ(count_if_not(dk, zero), 0) << "dK of a sequence without queries is not 0";
    EXPECT_EQ(count_if_not(dv, zero), 0) << "dV of a sequence without queries is not 0";
    return;
  }
  const double quarter_eps = dtype == DType::kBF16 ? 1e-3 : 1.25e-4;
  const reference::Gradients &e = want.exact, &n = want.naive;
  EXPECT_TRUE(testing::within_fa3_tolerance(dq, n.dq, e.dq, 2.0, quarter_eps * std::max(1.0, max_abs(e.dq)))) << "dQ";
  EXPECT_TRUE(testing::within_fa3_tolerance(dk, n.dk, e.dk, 2.0, quarter_eps * std::max(1.0, max_abs(e.dk)))) << "dK";
  EXPECT_TRUE(testing::within_fa3_tolerance(dv, n.dv, e.dv, 2.0, quarter_eps * std::max(1.0, max_abs(e.dv)))) << "dV";
}

// (seqlen_q, seqlen_k) per sequence: no queries, no keys, neither, 1, 63/64/65
// and 127/128/129 (the backward tiles are 128x128, 64x128 and 64x64:
// tile_config.hpp backward_tile), q != k both ways and across a tile edge,
// rows that see no key (causal, q > k); with_long adds a 2000-long sequence
// among the short ones.
Lengths ragged_lengths(bool with_long) {
  static_assert(backward_tile(64).block_m == 128 && backward_tile(128).block_m == 64 && backward_tile(256).block_n == 64,
                "the lengths below straddle these tiles' edges");
  // Some lengths two or three times, apart: the main kernel deals each run
  // of equal lengths as one equal-length batch (Schedule::work_item_of_run).
  Lengths l{{0, 5},     {1, 1},     {63, 63},   {64, 64},   {65, 65},   {5, 0},   {127, 127},
            {128, 128}, {129, 129}, {300, 113}, {113, 300}, {0, 0},     {65, 129}, {129, 64},
            {1, 200},   {200, 1},   {17, 17},   {3, 3},     {128, 128}, {65, 65}, {300, 113},
            {1, 1},     {128, 128}};
  if (with_long) l.insert(l.begin() + 9, std::pair<int64_t, int64_t>{2000, 2000});
  return l;
}

std::vector<int> iota_order(size_t n) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::string schedule_name(ScheduleKind kind) { return std::string(to_string(kind)); }

// Documents of the bitwise tests (no reference needed), one set per (element
// type, seed, heads, head_dim) shared by the tests that use it: generating the
// values costs more host time than the runs. The fp64 copies are dropped.
template <class Element>
const std::vector<Document<Element>>& cached_documents(const Lengths& lengths, int64_t heads_q, int64_t heads_kv,
                                                        int64_t head_dim, uint64_t seed) {
  static std::map<std::tuple<uint64_t, int64_t, int64_t, int64_t>, std::vector<Document<Element>>> cache;
  auto it = cache.find({seed, heads_q, heads_kv, head_dim});
  if (it == cache.end()) {
    std::vector<Document<Element>> docs =
        make_documents<Element>(lengths, Heads{heads_q, heads_kv, head_dim}, seed, /*with_dout=*/true);
    for (Document<Element>& d : docs) d.q_exact = d.k_exact = d.v_exact = d.dout_exact = {};
    it = cache.emplace(std::make_tuple(seed, heads_q, heads_kv, head_dim), std::move(docs)).first;
  }
  return it->second;
}

// --------------------------------------------------------------- accuracy

struct AccuracyCase {
  DType dtype;
  int64_t head_dim;
  bool causal;
  int64_t heads_q, heads_kv;
  bool long_document;  // a 2000 x 2000 sequence among the short ones
  bool use_seqused;    // seqused with 3 rows of slack per sequence
  int64_t lead;        // rows of no sequence before the first
};

std::string accuracy_name(const AccuracyCase& c) {
  std::ostringstream out;
  out << to_string(c.dtype) << "_d" << c.head_dim << (c.causal ? "_causal" : "_full") << "_h" << c.heads_q << "x"
      << c.heads_kv << (c.long_document ? "_long" : "") << (c.use_seqused ? "_seqused" : "") << "_lead" << c.lead;
  return out.str();
}

template <class Element>
void run_accuracy(const AccuracyCase& c) {
  const Heads h{c.heads_q, c.heads_kv, c.head_dim};
  const auto docs = make_documents<Element>(ragged_lengths(c.long_document), h,
                                            std::hash<std::string>{}(accuracy_name(c)), /*with_dout=*/true);
  // Mixed order: the long sequence (and the empty ones) among the others.
  std::vector<int> order = iota_order(docs.size());
  std::shuffle(order.begin(), order.end(), std::mt19937_64(c.head_dim + c.heads_q));
  std::future<std::vector<ExpectedGradients>> expected =
      std::async(std::launch::async, [&] { return expected_gradients(docs, h, c.causal); });
  VarlenBackwardRunner<Element> runner(docs, order, c.lead, h, c.causal, c.use_seqused);
  std::vector<std::pair<std::string, std::vector<DocumentGradients>>> runs;
  const int group = static_cast<int>(c.heads_q / c.heads_kv);
  for (ScheduleKind kind :
       {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kAuto})
    // GQA: also chains that walk the whole group (dK/dV stored per sequence from registers).
    for (int walk : {0, group}) {
      if (walk == 1) continue;
      const std::string name = schedule_name(kind) + (walk > 0 ? ", q_heads_per_chain " + std::to_string(walk) : "");
      SCOPED_TRACE("schedule " + name);
      Options o = backward_options(c.causal, kind);
      o.q_heads_per_chain = walk;
      runner.run(o);
      runs.emplace_back(name, runner.results());
    }
  const std::vector<ExpectedGradients> want = expected.get();
  for (const auto& [name, got] : runs)
    for (size_t i = 0; i < docs.size(); ++i) {
      SCOPED_TRACE("schedule " + name + ", document " + std::to_string(i) + " (seqlen_q " +
                   std::to_string(docs[i].seqlen_q) + ", seqlen_k " + std::to_string(docs[i].seqlen_k) + ")");
      expect_accurate(c.dtype, got[i], want[i], docs[i].seqlen_q, docs[i].seqlen_k);
    }
}

class BackwardVarlenAccuracy : public ::testing::TestWithParam<AccuracyCase> {};

TEST_P(BackwardVarlenAccuracy, MatchesReferencePerSequence) {
  DASH_REQUIRE_SM90();
  if (GetParam().dtype == DType::kBF16)
    run_accuracy<__nv_bfloat16>(GetParam());
  else
    run_accuracy<__half>(GetParam());
}

// Not every combination: each head dim and dtype, both masks, GQA 4:1 and
// MHA, seqused and lead padding, spread over the cases (the fp64 reference
// dominates the time; the two long cases ~ a few seconds each).
std::vector<AccuracyCase> accuracy_cases() {
  const AccuracyCase all[] = {
      {DType::kBF16, 64, true, 8, 2, true, false, 0},    {DType::kBF16, 64, false, 4, 4, false, true, 3},
      {DType::kBF16, 128, true, 4, 4, false, true, 1},   {DType::kBF16, 128, false, 8, 2, false, false, 67},
      {DType::kBF16, 256, true, 8, 2, false, false, 0},  {DType::kBF16, 256, false, 2, 2, false, true, 5},
      {DType::kFP16, 64, false, 8, 2, false, false, 7},  {DType::kFP16, 128, true, 8, 2, false, true, 0},
      {DType::kFP16, 256, true, 4, 4, true, false, 64},
  };
  std::vector<AccuracyCase> cases;
  for (const AccuracyCase& c : all)
    if (testing::is_compiled(Pass::kBackward, c.dtype, c.head_dim) &&
        testing::is_compiled(Pass::kForward, c.dtype, c.head_dim))
      cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Varlen, BackwardVarlenAccuracy, ::testing::ValuesIn(accuracy_cases()),
                         [](const ::testing::TestParamInfo<AccuracyCase>& info) { return accuracy_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardVarlenAccuracy);

// ------------------------------------------------------ packing invariance

void expect_same_document(const DocumentGradients& expected, const DocumentGradients& actual, int64_t seqlen_q,
                          int64_t seqlen_k, Heads h, const std::string& what) {
  const std::vector<int64_t> q_dims{seqlen_q, h.q, h.dim}, k_dims{seqlen_k, h.kv, h.dim};
  // The backward's inputs first: out and lse of the forward (its own tests
  // promise these bits); if they differ, the gradients cannot be compared.
  EXPECT_TRUE(testing::bitwise_equal(expected.out, actual.out, q_dims)) << what << ": forward out (input)";
  EXPECT_TRUE(testing::bitwise_equal(expected.lse, actual.lse, {h.q, seqlen_q})) << what << ": forward lse (input)";
  EXPECT_TRUE(testing::bitwise_equal(expected.dq, actual.dq, q_dims)) << what << ": dQ";
  EXPECT_TRUE(testing::bitwise_equal(expected.dk, actual.dk, k_dims)) << what << ": dK";
  EXPECT_TRUE(testing::bitwise_equal(expected.dv, actual.dv, k_dims)) << what << ": dV";
}

using InvarianceParam = std::tuple<testing::KernelRow, bool, ScheduleKind>;

template <class Element>
void run_invariance(int64_t head_dim, bool causal, ScheduleKind kind, bool with_dlse, int q_heads_per_chain = 0) {
  const Heads h{8, 2, head_dim};
  const std::vector<Document<Element>>& docs = cached_documents<Element>(ragged_lengths(true), h.q, h.kv, h.dim, 1234);
  std::vector<std::vector<float>> dlse_values;
  if (with_dlse) {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& d : docs) {
      std::vector<float> values(h.q * d.seqlen_q);
      for (float& x : values) x = normal(rng);
      dlse_values.push_back(std::move(values));
    }
  }
  const std::vector<std::vector<float>>* dlse = with_dlse ? &dlse_values : nullptr;
  Options o = backward_options(causal, kind);
  o.q_heads_per_chain = q_heads_per_chain;

  const std::vector<int> order = iota_order(docs.size());
  std::vector<int> reversed(order.rbegin(), order.rend()), shuffled = order;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));

  // Packing A: in order, no padding. B: reversed after 67 rows of padding, both
  // passes on a grid 100 SMs smaller. C: shuffled after 1 row, seqused slack.
  VarlenBackwardRunner<Element> a(docs, order, 0, h, causal, false, dlse);
  a.run(o);
  const std::vector<DocumentGradients> packed = a.results();
  VarlenBackwardRunner<Element> b(docs, reversed, 67, h, causal, false, dlse, /*forward_sm_margin=*/100);
  Options margin = backward_options(causal, kind, 0, /*sm_margin=*/100);
  margin.q_heads_per_chain = q_heads_per_chain;
  b.run(margin);
  const std::vector<DocumentGradients> other = b.results();
  VarlenBackwardRunner<Element> c(docs, shuffled, 1, h, causal, true, dlse);
  c.run(o);
  const std::vector<DocumentGradients> used = c.results();

  for (size_t i = 0; i < docs.size(); ++i) {
    const Document<Element>& d = docs[i];
    const std::string doc = "document " + std::to_string(i) + " (seqlen_q " + std::to_string(d.seqlen_q) +
                            ", seqlen_k " + std::to_string(d.seqlen_k) + ")";
    expect_same_document(packed[i], other[i], d.seqlen_q, d.seqlen_k, h, doc + ", reversed packing vs in order");
    expect_same_document(packed[i], used[i], d.seqlen_q, d.seqlen_k, h, doc + ", seqused packing vs in order");
    // Alone: a batch of one (7 rows of no sequence after it).
    VarlenBackwardRunner<Element> alone(docs, {static_cast<int>(i)}, 0, h, causal, false, dlse);
    alone.run(o);
    expect_same_document(alone.results()[i], packed[i], d.seqlen_q, d.seqlen_k, h, doc + ", alone vs packed");
    // The fixed-length API on the document alone (it takes no empty tensor).
    if (d.seqlen_q > 0 && d.seqlen_k > 0) {
      const DocumentGradients fixed = run_fixed_alone(d, h, o, with_dlse ? &dlse_values[i] : nullptr);
      expect_same_document(fixed, packed[i], d.seqlen_q, d.seqlen_k, h, doc + ", backward() alone vs packed");
    }
  }
}

class BackwardVarlenPacking : public ::testing::TestWithParam<InvarianceParam> {};

TEST_P(BackwardVarlenPacking, SequenceBitsIgnorePackingAndEqualFixedLength) {
  DASH_REQUIRE_SM90();
  const auto [row, causal, kind] = GetParam();
  if (row.dtype == DType::kBF16)
    run_invariance<__nv_bfloat16>(row.head_dim, causal, kind, false);
  else
    run_invariance<__half>(row.head_dim, causal, kind, false);
}

// Chains over the whole GQA group of 4 (dK/dV stored per sequence).
TEST_P(BackwardVarlenPacking, GroupWalkSequenceBitsIgnorePackingAndEqualFixedLength) {
  DASH_REQUIRE_SM90();
  const auto [row, causal, kind] = GetParam();
  if (row.dtype == DType::kBF16)
    run_invariance<__nv_bfloat16>(row.head_dim, causal, kind, false, 4);
  else
    run_invariance<__half>(row.head_dim, causal, kind, false, 4);
}

// dlse (heads_q, total_q) enters each sequence like backward()'s dlse.
TEST_P(BackwardVarlenPacking, WithDlseSequenceBitsIgnorePackingAndEqualFixedLength) {
  DASH_REQUIRE_SM90();
  const auto [row, causal, kind] = GetParam();
  if (!causal || kind != ScheduleKind::kDescending) GTEST_SKIP() << "dlse: causal descending only (time)";
  if (row.dtype == DType::kBF16)
    run_invariance<__nv_bfloat16>(row.head_dim, causal, kind, true);
  else
    run_invariance<__half>(row.head_dim, causal, kind, true);
}

std::vector<testing::KernelRow> rows_with_forward() {
  std::vector<testing::KernelRow> rows;
  for (const testing::KernelRow& row : testing::compiled_rows(Pass::kBackward))
    if (testing::is_compiled(Pass::kForward, row.dtype, row.head_dim)) rows.push_back(row);
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Varlen, BackwardVarlenPacking,
                         ::testing::Combine(::testing::ValuesIn(rows_with_forward()), ::testing::Bool(),
                                            ::testing::Values(ScheduleKind::kFA3, ScheduleKind::kDescending)),
                         [](const ::testing::TestParamInfo<InvarianceParam>& info) {
                           const testing::KernelRow& row = std::get<0>(info.param);
                           return std::string(to_string(row.dtype)) + "_d" + std::to_string(row.head_dim) +
                                  (std::get<1>(info.param) ? "_causal_" : "_full_") +
                                  schedule_name(std::get<2>(info.param));
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardVarlenPacking);

// ------------------------------------------------------------ determinism

// A ragged GQA batch: the ragged lengths (2000-long one included) and 24 more
// of random q and k lengths below 400.
Lengths determinism_lengths() {
  Lengths l = ragged_lengths(true);
  std::mt19937_64 rng(17);
  for (int i = 0; i < 24; ++i) l.push_back({static_cast<int64_t>(rng() % 400), static_cast<int64_t>(rng() % 400)});
  return l;
}

// Reruns on one workspace (not re-poisoned; the outputs are), compared on the
// device against the first run, the zeroed rows of no sequence included.
template <class Element>
void expect_reruns_equal(VarlenBackwardRunner<Element>& runner, const Options& o, int reruns) {
  runner.run(o);
  EXPECT_EQ(runner.unowned_rows_not_zero(), 0) << "gradient rows of no sequence are not zero";
  testing::expect_reruns_bitwise_equal(runner, o, reruns, "packed dQ, dK or dV");
}

void expect_same_packed(const std::vector<uint16_t>& expected, const std::vector<uint16_t>& actual, int64_t rows,
                        int64_t heads, int64_t dim, const std::string& what) {
  EXPECT_TRUE(testing::bitwise_equal(expected, actual, {rows, heads, dim})) << what;
}

using DeterminismParam = std::tuple<ScheduleKind, int64_t>;

class BackwardVarlenDeterminism : public ::testing::TestWithParam<DeterminismParam> {
 protected:
  void SetUp() override {
    const std::string reason = testing::missing_sm90_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test needs an sm_90 GPU: " << reason;
    const int64_t head_dim = std::get<1>(GetParam());
    if (!testing::is_compiled(Pass::kBackward, DType::kBF16, head_dim) ||
        !testing::is_compiled(Pass::kForward, DType::kBF16, head_dim))
      GTEST_SKIP() << "bf16 hdim " << head_dim << " not compiled";
    heads_ = Heads{8, 2, head_dim};
    const std::vector<Document<__nv_bfloat16>>& docs =
        cached_documents<__nv_bfloat16>(determinism_lengths(), heads_.q, heads_.kv, heads_.dim, 21);
    std::vector<int> order = iota_order(docs.size());
    std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
    runner_ = std::make_unique<VarlenBackwardRunner<__nv_bfloat16>>(docs, order, 5, heads_, true, true);
  }
  Options options(int max_ctas = 0) const { return backward_options(true, std::get<0>(GetParam()), max_ctas); }

  Heads heads_{};
  std::unique_ptr<VarlenBackwardRunner<__nv_bfloat16>> runner_;
};

TEST_P(BackwardVarlenDeterminism, HundredRerunsBitwiseEqual) { expect_reruns_equal(*runner_, options(), 100); }

// Every grid cap gives the same bits (fa3 and descending run on any grid).
TEST_P(BackwardVarlenDeterminism, GridCapInvariant) {
  runner_->run(options());
  const std::vector<uint16_t> dq = runner_->packed_dq(), dk = runner_->packed_dk(), dv = runner_->packed_dv();
  const testing::VarlenLayout& l = runner_->batch().layout();
  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int cap : {1, 3, 17, sms}) {
    SCOPED_TRACE("max_ctas " + std::to_string(cap));
    runner_->run(options(cap));
    expect_same_packed(dq, runner_->packed_dq(), l.total_q, heads_.q, heads_.dim, "dQ, capped grid");
    expect_same_packed(dk, runner_->packed_dk(), l.total_k, heads_.kv, heads_.dim, "dK, capped grid");
    expect_same_packed(dv, runner_->packed_dv(), l.total_k, heads_.kv, heads_.dim, "dV, capped grid");
  }
}

TEST_P(BackwardVarlenDeterminism, EqualUnderConcurrentKernel) {
  runner_->run(options());
  const std::vector<uint16_t> dq = runner_->packed_dq(), dk = runner_->packed_dk(), dv = runner_->packed_dv();
  const testing::VarlenLayout& l = runner_->batch().layout();

  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t busy, work;
  DASH_TEST_CUDA(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  DASH_TEST_CUDA(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking));
  DeviceBuffer<int> release(1);
  DASH_TEST_CUDA(cudaMemset(release.get(), 0, sizeof(int)));
  DASH_TEST_CUDA(cudaDeviceSynchronize());
  // One CTA per SM (the shared memory forces it) on all but 20 SMs.
  const int occupied = std::max(1, sms - 20);
  DASH_TEST_CUDA(cudaFuncSetAttribute(testing::occupy_sms<int>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      200 * 1024));
  testing::occupy_sms<int><<<occupied, 32, 200 * 1024, busy>>>(release.get());
  DASH_TEST_CUDA(cudaGetLastError());
  try {
    runner_->run(options(), work);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const int one = 1;
  DASH_TEST_CUDA(cudaMemcpyAsync(release.get(), &one, sizeof one, cudaMemcpyHostToDevice, work));
  testing::wait_or_die(busy, 30.0, "occupy_sms");
  expect_same_packed(dq, runner_->packed_dq(), l.total_q, heads_.q, heads_.dim, "dQ beside a kernel holding most SMs");
  expect_same_packed(dk, runner_->packed_dk(), l.total_k, heads_.kv, heads_.dim, "dK beside a kernel holding most SMs");
  expect_same_packed(dv, runner_->packed_dv(), l.total_k, heads_.kv, heads_.dim, "dV beside a kernel holding most SMs");
  DASH_TEST_CUDA(cudaStreamDestroy(busy));
  DASH_TEST_CUDA(cudaStreamDestroy(work));
}

std::vector<int64_t> bf16_head_dims() {
  std::vector<int64_t> dims;
  for (int64_t d : testing::compiled_head_dims(Pass::kBackward, DType::kBF16))
    if (testing::is_compiled(Pass::kForward, DType::kBF16, d)) dims.push_back(d);
  return dims;
}

INSTANTIATE_TEST_SUITE_P(Varlen, BackwardVarlenDeterminism,
                         ::testing::Combine(::testing::Values(ScheduleKind::kFA3, ScheduleKind::kDescending,
                                                              ScheduleKind::kAuto),
                                            ::testing::ValuesIn(bf16_head_dims())),
                         [](const ::testing::TestParamInfo<DeterminismParam>& info) {
                           return schedule_name(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardVarlenDeterminism);

// 1000 reruns of a smaller ragged batch (as test_backward_determinism.cu does
// for the fixed-length backward).
class BackwardVarlenThousandReruns : public ::testing::TestWithParam<DeterminismParam> {};

TEST_P(BackwardVarlenThousandReruns, BitwiseEqual) {
  DASH_REQUIRE_SM90();
  const auto [kind, head_dim] = GetParam();
  if (!testing::is_compiled(Pass::kBackward, DType::kBF16, head_dim) ||
      !testing::is_compiled(Pass::kForward, DType::kBF16, head_dim))
    GTEST_SKIP() << "bf16 hdim " << head_dim << " not compiled";
  const Heads h{4, 2, head_dim};
  const Lengths lengths{{1, 1}, {65, 65}, {0, 7}, {129, 129}, {300, 200}, {7, 0}, {500, 500}, {200, 300}};
  const auto docs = make_documents<__nv_bfloat16>(lengths, h, 77, /*with_dout=*/true);
  VarlenBackwardRunner<__nv_bfloat16> runner(docs, iota_order(docs.size()), 0, h, true, false);
  expect_reruns_equal(runner, backward_options(true, kind), 1000);
}

INSTANTIATE_TEST_SUITE_P(Varlen, BackwardVarlenThousandReruns,
                         ::testing::Combine(::testing::Values(ScheduleKind::kFA3, ScheduleKind::kDescending),
                                            ::testing::ValuesIn(bf16_head_dims())),
                         [](const ::testing::TestParamInfo<DeterminismParam>& info) {
                           return schedule_name(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardVarlenThousandReruns);

// ------------------------------------------------------------- validation

// A small ragged GQA batch for the refusals, on the first compiled bf16 row.
class BackwardVarlenValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = testing::missing_sm90_reason();
    if (!reason.empty()) GTEST_SKIP() << "GPU test needs an sm_90 GPU: " << reason;
    const std::vector<int64_t> dims = bf16_head_dims();
    if (dims.empty()) GTEST_SKIP() << "no bf16 row compiled for both passes";
    heads_ = Heads{8, 2, dims.front()};
    docs_ = make_documents<__nv_bfloat16>({{100, 100}, {0, 30}, {65, 129}, {300, 300}}, heads_, 9, true);
    runner_ = std::make_unique<VarlenBackwardRunner<__nv_bfloat16>>(docs_, iota_order(docs_.size()), 2, heads_, true,
                                                                    false);
  }

  // A refused call leaves dq, dk, dv as they were: poisoned everywhere.
  void expect_outputs_untouched() const {
    for (const std::vector<uint16_t>& x : {runner_->packed_dq(), runner_->packed_dk(), runner_->packed_dv()})
      EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](uint16_t b) { return b == 0xFFFF; }))
          << "a refused call wrote an output";
  }

  Heads heads_{};
  std::vector<Document<__nv_bfloat16>> docs_;
  std::unique_ptr<VarlenBackwardRunner<__nv_bfloat16>> runner_;
};

TEST_F(BackwardVarlenValidation, WaveSchedulesRefusedByName) {
  for (bool causal : {false, true})
    for (ScheduleKind kind : {ScheduleKind::kShift, ScheduleKind::kSymmetricShift}) {
      SCOPED_TRACE(schedule_name(kind) + (causal ? " causal" : " full"));
      const Options o = backward_options(causal, kind);
      // A workspace large enough for any schedule: the refusal must be the schedule's.
      size_t bytes = runner_->workspace_size(backward_options(causal, ScheduleKind::kDescending));
      try {
        bytes = std::max(bytes, runner_->workspace_size(o));
      } catch (const Error&) {  // the size query may refuse the schedule too
      }
      const DeviceBuffer<char> workspace(std::max<size_t>(bytes, 1));
      VarlenBackwardArgs a = runner_->args();
      a.workspace = workspace.get();
      a.workspace_bytes = workspace.bytes();
      runner_->poison_outputs(nullptr);
      DASH_TEST_CUDA(cudaDeviceSynchronize());
      try {
        backward_varlen(a, o, nullptr);
        ADD_FAILURE() << "backward_varlen accepted schedule " << schedule_name(kind);
      } catch (const Error& e) {
        EXPECT_TRUE(e.code() == ErrorCode::kNotSupported || e.code() == ErrorCode::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find(schedule_name(kind)), std::string::npos)
            << "the message does not name the schedule: " << e.what();
      }
      DASH_TEST_CUDA(cudaDeviceSynchronize());
      expect_outputs_untouched();
    }
}

TEST_F(BackwardVarlenValidation, WorkspaceTooSmallRefused) {
  for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending}) {
    SCOPED_TRACE(schedule_name(kind));
    const Options o = backward_options(true, kind);
    const size_t required = runner_->workspace_size(o);
    ASSERT_GT(required, 0u) << "the varlen backward needs a dQ accumulator";
    const DeviceBuffer<char> workspace(required);
    VarlenBackwardArgs a = runner_->args();
    a.workspace = workspace.get();
    for (size_t bytes : {required - 1, size_t{0}}) {
      SCOPED_TRACE("workspace_bytes " + std::to_string(bytes) + " of " + std::to_string(required));
      a.workspace_bytes = bytes;
      runner_->poison_outputs(nullptr);
      DASH_TEST_CUDA(cudaDeviceSynchronize());
      try {
        backward_varlen(a, o, nullptr);
        ADD_FAILURE() << "backward_varlen accepted a workspace of " << bytes << " bytes";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find("workspace_bytes"), std::string::npos) << e.what();
      }
      DASH_TEST_CUDA(cudaDeviceSynchronize());
      expect_outputs_untouched();
    }
    // The size it asked for is enough.
    runner_->run(o);
    EXPECT_EQ(runner_->unowned_rows_not_zero(), 0);
  }
}

// cu_seqlens that do not ascend (not checked on the host: it would need a
// sync): sequence 2 starts inside sequence 0, sequence 1 is empty. The
// preprocess flags it, and the ordered schedules then add unordered instead
// of waiting for ranks that overlapping sequences share (they could wait
// forever). The values are the bad input's; the call must finish, under the
// watchdog, without a CUDA error, with every gradient element written.
TEST_F(BackwardVarlenValidation, CuSeqlensNotAscendingFinish) {
  VarlenBackwardArgs a = runner_->args();
  const size_t entries = static_cast<size_t>(a.shape.batch) + 1;
  std::vector<int32_t> cu_q(entries), cu_k(entries);
  DASH_TEST_CUDA(cudaMemcpy(cu_q.data(), a.lengths.cu_seqlens_q, entries * sizeof(int32_t), cudaMemcpyDeviceToHost));
  DASH_TEST_CUDA(cudaMemcpy(cu_k.data(), a.lengths.cu_seqlens_k, entries * sizeof(int32_t), cudaMemcpyDeviceToHost));
  for (std::vector<int32_t>* cu : {&cu_q, &cu_k}) (*cu)[2] = (*cu)[0] + 1;
  const DeviceBuffer<int32_t> bad_q(entries), bad_k(entries);
  bad_q.upload(cu_q);
  bad_k.upload(cu_k);
  a.lengths.cu_seqlens_q = bad_q.get();
  a.lengths.cu_seqlens_k = bad_k.get();
  for (ScheduleKind kind : {ScheduleKind::kFA3, ScheduleKind::kDescending})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(schedule_name(kind) + (causal ? " causal" : " full"));
      const Options o = backward_options(causal, kind);
      const DeviceBuffer<char> workspace(std::max<size_t>(backward_varlen_workspace_size(a.shape, a.lengths, o), 1));
      workspace.poison();
      a.workspace = workspace.get();
      a.workspace_bytes = workspace.bytes();
      runner_->poison_outputs(nullptr);
      {
        const testing::Watchdog watchdog(30.0, "dash_attn::backward_varlen with cu_seqlens not ascending");
        backward_varlen(a, o, nullptr);
        DASH_TEST_CUDA(cudaDeviceSynchronize());
      }
      for (const std::vector<uint16_t>& x : {runner_->packed_dq(), runner_->packed_dk(), runner_->packed_dv()})
        EXPECT_EQ(std::count(x.begin(), x.end(), uint16_t{0xFFFF}), 0) << "a gradient element was not written";
    }
}

// The workspace is a function of the totals, the batch and the heads: two
// packings with the same ones but other sequence lengths ask for the same bytes.
TEST_F(BackwardVarlenValidation, WorkspaceSizeIgnoresSequenceLengths) {
  const auto other_docs = make_documents<__nv_bfloat16>({{400, 1}, {1, 400}, {64, 129}, {0, 29}}, heads_, 10, true);
  VarlenBackwardRunner<__nv_bfloat16> other(other_docs, iota_order(other_docs.size()), 2, heads_, true, false);
  ASSERT_EQ(other.batch().layout().total_q, runner_->batch().layout().total_q);
  ASSERT_EQ(other.batch().layout().total_k, runner_->batch().layout().total_k);
  for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kAuto}) {
    VarlenBackwardArgs a = runner_->args();
    a.shape.seqlen_q = a.shape.seqlen_k = 400;  // the same max lengths too
    VarlenBackwardArgs b = other.args();
    b.shape.seqlen_q = b.shape.seqlen_k = 400;
    const Options o = backward_options(true, kind);
    EXPECT_EQ(backward_varlen_workspace_size(a.shape, a.lengths, o), backward_varlen_workspace_size(b.shape, b.lengths, o))
        << schedule_name(kind);
  }
}

}  // namespace
}  // namespace dash_attn
