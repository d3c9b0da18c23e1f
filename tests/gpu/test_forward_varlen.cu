// The varlen forward (forward_varlen) against the fp64 reference run on each
// sequence alone, on ragged batches with lengths 0, 1, tile +- 1, one long
// among short ones, seqlen_q != seqlen_k per sequence, GQA, causal and not,
// seqused; outputs poisoned. Then the reproducibility the API promises: a
// sequence's out and lse bits do not depend on what is packed around it (two
// packings in different orders, at different offsets, with a different grid),
// and equal forward() on the sequence alone.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "common/compare.hpp"
#include "dash_attn/api.hpp"
#include "gpu_support.hpp"
#include "varlen_harness.hpp"

namespace dash_attn {
namespace {

using testing::DeviceBuffer;

using testing::Document;
using testing::Heads;
using testing::make_documents;

// What one document got back: out bits (seq, head, dim) and lse (head, seq).
struct DocumentResult {
  std::vector<uint16_t> out_bits;
  std::vector<float> lse;
};

// Packs the documents in `order` after `lead` padding rows (which belong to
// no sequence: cu_seqlens start there) and runs forward_varlen.
template <class Element>
std::vector<DocumentResult> run_packed(const std::vector<Document<Element>>& docs, const std::vector<int>& order,
                                       int64_t lead, Heads h, DType dtype, bool causal, bool use_seqused,
                                       int sm_margin) {
  const testing::PackedBatch<Element> batch(docs, order, lead, h, use_seqused);
  const testing::VarlenLayout& l = batch.layout();
  DeviceBuffer<Element> out(batch.q_elements());
  DeviceBuffer<float> lse(batch.lse_elements());
  out.poison();
  lse.poison();

  VarlenForwardArgs a = batch.forward_args(out.get(), lse.get());
  a.dtype = dtype;
  Options options;
  options.causal = causal;
  options.sm_margin = sm_margin;
  forward_varlen(a, options, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<Element> out_host = out.download();
  const std::vector<float> lse_host = lse.download();

  // Rows of no sequence (padding, seqused slack, the tail), poisoned before
  // the call, come back as out = 0 and lse = -inf.
  EXPECT_EQ(testing::unowned_rows_not_zero(out_host, l.owned_q, batch.row_q()), 0)
      << "out rows of no sequence are not zero";
  int64_t lse_not_cleared = 0;
  for (int64_t head = 0; head < h.q; ++head)
    for (int64_t r = 0; r < l.total_q; ++r)
      if (!l.owned_q[r] && !(std::isinf(lse_host[head * l.total_q + r]) && lse_host[head * l.total_q + r] < 0))
        ++lse_not_cleared;
  EXPECT_EQ(lse_not_cleared, 0) << "lse rows of no sequence are not -inf";

  std::vector<DocumentResult> results(docs.size());
  for (size_t slot = 0; slot < order.size(); ++slot) {
    const Document<Element>& d = docs[order[slot]];
    DocumentResult& r = results[order[slot]];
    r.out_bits = testing::slot_bits(out_host, l.cu_q[slot], d.seqlen_q, batch.row_q());
    r.lse = testing::slot_lse(lse_host, l.total_q, h.q, l.cu_q[slot], d.seqlen_q);
  }
  return results;
}

template <class Element>
double as_double(uint16_t bits) {
  Element x;
  std::memcpy(&x, &bits, sizeof x);
  return static_cast<double>(static_cast<float>(x));
}

// forward() on one document alone (batch 1).
template <class Element>
DocumentResult run_alone(const Document<Element>& d, Heads h, DType dtype, bool causal) {
  DeviceBuffer<Element> qd(d.q.size()), kd(d.k.size()), vd(d.v.size()), out(d.q.size());
  DeviceBuffer<float> lse(h.q * d.seqlen_q);
  qd.upload(d.q), kd.upload(d.k), vd.upload(d.v);
  out.poison();
  ForwardArgs a;
  a.shape = ProblemShape{1, d.seqlen_q, d.seqlen_k, h.q, h.kv, h.dim};
  a.dtype = dtype;
  a.q = testing::dense_view(qd.get(), d.seqlen_q, h.q, h.dim);
  a.k = testing::dense_view(kd.get(), d.seqlen_k, h.kv, h.dim);
  a.v = testing::dense_view(vd.get(), d.seqlen_k, h.kv, h.dim);
  a.out = testing::dense_view(out.get(), d.seqlen_q, h.q, h.dim);
  a.lse = LseView{lse.get(), h.q * d.seqlen_q, d.seqlen_q};
  Options options;
  options.causal = causal;
  forward(a, options, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  DocumentResult r;
  const std::vector<Element> o = out.download();
  r.out_bits.resize(o.size());
  std::memcpy(r.out_bits.data(), o.data(), o.size() * sizeof(uint16_t));
  r.lse = lse.download();
  return r;
}

struct VarlenCase {
  DType dtype;
  int64_t head_dim;
  bool causal;
};

std::string case_name(const VarlenCase& c) {
  std::ostringstream out;
  out << to_string(c.dtype) << "_d" << c.head_dim << (c.causal ? "_causal" : "_full");
  return out.str();
}

template <class Element>
void run_case(const VarlenCase& c) {
  const Heads h{4, 2, c.head_dim};  // GQA 2:1
  // (seqlen_q, seqlen_k): 0 rows, 0 keys, 1, tile +- 1, q != k both ways, one long among short ones.
  // The 2100-row one makes a causal hdim 64 batch run the tall tile while its
  // shorter documents alone run the 128-row one (forward_tile_for): their bits
  // must not change.
  const std::vector<std::pair<int64_t, int64_t>> lengths{{0, 5},     {1, 1},       {127, 127}, {128, 128},
                                                         {129, 129}, {5, 0},       {300, 113}, {113, 300},
                                                         {17, 17},   {1000, 1000}, {3, 3},     {2100, 2100}};
  const auto docs = make_documents<Element>(lengths, h, std::hash<std::string>{}(case_name(c)));
  std::vector<int> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  const std::vector<DocumentResult> packed = run_packed(docs, order, 0, h, c.dtype, c.causal, false, 0);

  const double scale = 1.0 / std::sqrt(static_cast<double>(h.dim));
  const double atol = c.dtype == DType::kBF16 ? 1e-3 : 1.25e-4;
  for (size_t i = 0; i < docs.size(); ++i) {
    const Document<Element>& d = docs[i];
    if (d.seqlen_q == 0) continue;
    std::vector<double> out(packed[i].out_bits.size());
    for (size_t e = 0; e < out.size(); ++e) out[e] = as_double<Element>(packed[i].out_bits[e]);
    if (d.seqlen_k == 0) {  // rows with no keys: out 0, lse -inf
      for (double x : out) EXPECT_EQ(x, 0.0) << "document " << i;
      for (float x : packed[i].lse) EXPECT_TRUE(std::isinf(x) && x < 0) << "document " << i;
      continue;
    }
    const ProblemShape alone{1, d.seqlen_q, d.seqlen_k, h.q, h.kv, h.dim};
    const reference::ForwardResult exact = reference::attention_forward(alone, c.causal, scale, d.q_exact, d.k_exact,
                                                                        d.v_exact);
    const reference::ForwardResult naive =
        reference::naive_forward(c.dtype, alone, c.causal, scale, d.q_exact, d.k_exact, d.v_exact);
    EXPECT_TRUE(testing::within_fa3_tolerance(out, naive.out, exact.out, 2.0, atol)) << "O of document " << i;
    std::vector<double> lse(packed[i].lse.begin(), packed[i].lse.end()), naive_lse = naive.lse, exact_lse = exact.lse;
    for (size_t r = 0; r < exact_lse.size(); ++r)
      if (std::isinf(exact_lse[r])) {
        EXPECT_TRUE(std::isinf(lse[r]) && lse[r] < 0) << "empty row " << r << " of document " << i;
        lse[r] = naive_lse[r] = exact_lse[r] = 0.0;
      }
    EXPECT_TRUE(testing::within_fa3_tolerance(lse, naive_lse, exact_lse, 2.0, 1e-4)) << "LSE of document " << i;
    // The same bits as the fixed-length kernel on the document alone.
    const DocumentResult single = run_alone(d, h, c.dtype, c.causal);
    EXPECT_TRUE(testing::bitwise_equal(single.out_bits, packed[i].out_bits, {d.seqlen_q, h.q, h.dim}))
        << "O of document " << i << " alone vs packed";
    EXPECT_TRUE(testing::bitwise_equal(single.lse, packed[i].lse, {h.q, d.seqlen_q}))
        << "LSE of document " << i << " alone vs packed";
  }

  // Other packings: reversed after 64 + 3 rows of padding and a smaller grid;
  // shuffled with seqused slack after each sequence. Every document's bits stay.
  std::vector<int> reversed(order.rbegin(), order.rend()), shuffled = order;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  const std::vector<DocumentResult> again = run_packed(docs, order, 0, h, c.dtype, c.causal, false, 0);
  const std::vector<DocumentResult> other = run_packed(docs, reversed, 67, h, c.dtype, c.causal, false, 100);
  const std::vector<DocumentResult> used = run_packed(docs, shuffled, 1, h, c.dtype, c.causal, true, 0);
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<int64_t> out_shape{docs[i].seqlen_q, h.q, h.dim}, lse_shape{h.q, docs[i].seqlen_q};
    for (const auto* run : {&again, &other, &used}) {
      const char* which = run == &again ? "rerun" : run == &other ? "reversed packing" : "seqused packing";
      EXPECT_TRUE(testing::bitwise_equal(packed[i].out_bits, (*run)[i].out_bits, out_shape))
          << "O of document " << i << ", " << which;
      EXPECT_TRUE(testing::bitwise_equal(packed[i].lse, (*run)[i].lse, lse_shape))
          << "LSE of document " << i << ", " << which;
    }
  }
}

class ForwardVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(ForwardVarlen, MatchesReferencePerSequenceAndIgnoresPacking) {
  DASH_REQUIRE_SM90();
  if (GetParam().dtype == DType::kBF16)
    run_case<__nv_bfloat16>(GetParam());
  else
    run_case<__half>(GetParam());
}

std::vector<VarlenCase> varlen_cases() {
  std::vector<VarlenCase> cases;
  for (const testing::KernelRow& row : testing::compiled_rows(Pass::kForward))
    for (bool causal : {false, true}) cases.push_back({row.dtype, row.head_dim, causal});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Varlen, ForwardVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const ::testing::TestParamInfo<VarlenCase>& info) { return case_name(info.param); });

// A batch of many more sequences than a warp scans per step (and than CTAs),
// most of them short: every sequence still matches the kernel run alone.
TEST(ForwardVarlenMany, ThousandShortSequencesMatchRunsAlone) {
  DASH_REQUIRE_SM90();
  if (!testing::is_compiled(Pass::kForward, DType::kBF16, 64)) GTEST_SKIP() << "bf16 hdim 64 not compiled";
  const Heads h{2, 1, 64};
  std::vector<std::pair<int64_t, int64_t>> lengths;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const int64_t n = i == 500 ? 2000 : static_cast<int64_t>(rng() % 40);
    lengths.push_back({n, n});
  }
  const auto docs = make_documents<__nv_bfloat16>(lengths, h, 11);
  std::vector<int> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  for (bool causal : {false, true}) {
    const std::vector<DocumentResult> packed = run_packed(docs, order, 0, h, DType::kBF16, causal, false, 0);
    for (size_t i = 0; i < docs.size(); i += 37) {
      if (docs[i].seqlen_q == 0) continue;
      const DocumentResult single = run_alone(docs[i], h, DType::kBF16, causal);
      EXPECT_TRUE(testing::bitwise_equal(single.out_bits, packed[i].out_bits, {docs[i].seqlen_q, h.q, h.dim}))
          << "document " << i << (causal ? " causal" : " full");
    }
    const DocumentResult single = run_alone(docs[500], h, DType::kBF16, causal);
    EXPECT_TRUE(testing::bitwise_equal(single.out_bits, packed[500].out_bits, {docs[500].seqlen_q, h.q, h.dim}))
        << "the long document" << (causal ? " causal" : " full");
  }
}

}  // namespace
}  // namespace dash_attn
