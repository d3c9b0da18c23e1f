// Sliding windows, softcap and learnable attention sinks (issue 18) through
// the public API against the fp64 reference (attention_reference.hpp) with
// FlashAttention-3's rule (error <= 2 x the error of a naive same-precision
// attention + atol), on fresh random inputs (sinks: logits in [-2, 4]) and
// poisoned outputs (score_mods_harness.hpp):
//  - Accuracy (Windows/, Softcap/, Sinks/ ScoreModAccuracy): out and lse, rows
//    that see no key giving out 0 and lse -inf (the sink with sinks), forward
//    reruns bitwise; dq, dk, dv, dsinks for schedules atomic, fa3, descending,
//    auto (with sinks, a null dsinks leaves dq, dk, dv bits as they were). Windows
//    (0, 0), (1, 0), (0, 1), (37, 5), wider than the sequences, left only, right
//    only, causal + left; seqlen_q != seqlen_k both ways, tails off the tiles,
//    GQA/MQA/MHA, hdim 64/128/256, bf16/fp16.
//  - Varlen (ScoreModVarlen): window + softcap + sinks on a ragged batch, each
//    document against the reference alone, dsinks against the sum over the
//    documents; a document's out, lse, dq, dk, dv bits equal to forward() /
//    backward() on it alone and to another packing; dsinks rerun-deterministic.
//  - Determinism (ScoreModDeterminism): 2 x 1000 x 8/2 heads, hdim 128, causal
//    window (255, 0), softcap and sinks, fa3 and descending: dq, dk, dv, dsinks
//    bitwise over five reruns and grid caps.
//  - Refusals (ScoreModRefusals): shift/symmetric_shift with a window, window
//    bounds below -1, a negative or non-finite softcap, misaligned sinks/dsinks.
#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "score_mods_harness.hpp"

namespace dash_attn {
namespace {

using testing::DocumentBits;
using testing::Heads;
using testing::ModCase;
using testing::ModExpected;
using testing::ModGradients;
using testing::ModProblem;
using testing::ModRunner;
using testing::ScoreMods;
using testing::VarlenModRunner;

constexpr ScheduleKind kBackwardSchedules[] = {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                               ScheduleKind::kAuto};

std::string schedule_name(ScheduleKind kind) { return std::string(to_string(kind)); }

// Whether this build compiled the score-mod kernel of a row (kernel_table.hpp's
// ScoreMods rows; -DDASH_KERNELS may trim them): the tests of a missing row skip.
bool mods_compiled(Pass pass, DType dtype, int64_t head_dim) {
  return testing::is_compiled(pass, dtype, head_dim, /*score_mods=*/true);
}

bool compiled_both(DType dtype, int64_t head_dim) {
  return mods_compiled(Pass::kForward, dtype, head_dim) && mods_compiled(Pass::kBackward, dtype, head_dim);
}

std::vector<int64_t> dims_of_either_pass(DType dtype) {
  std::vector<int64_t> dims;
  for (int64_t d : {64, 128, 256})
    if (mods_compiled(Pass::kForward, dtype, d) || mods_compiled(Pass::kBackward, dtype, d)) dims.push_back(d);
  return dims;
}

void expect_same_bits(const std::vector<uint16_t>& expected, const std::vector<uint16_t>& actual,
                      std::vector<int64_t> dims, const std::string& what) {
  EXPECT_TRUE(testing::bitwise_equal(expected, actual, dims)) << what;
}

// ---------------------------------------------------------------- accuracy

struct ModShape {
  ScoreMods mods;
  ProblemShape shape;  // head_dim set per case
};

// Each (mods, shape) at every compiled bf16 head dim and at one fp16 head dim
// (taking turns): every mod meets every head dim without the full product.
std::vector<ModCase> cases_over_head_dims(const std::vector<ModShape>& list) {
  const std::vector<int64_t> bf16 = dims_of_either_pass(DType::kBF16), fp16 = dims_of_either_pass(DType::kFP16);
  std::vector<ModCase> cases;
  for (size_t i = 0; i < list.size(); ++i) {
    ProblemShape s = list[i].shape;
    for (int64_t d : bf16) {
      s.head_dim = d;
      cases.push_back({DType::kBF16, s, list[i].mods});
    }
    if (!fp16.empty()) {
      s.head_dim = fp16[i % fp16.size()];
      cases.push_back({DType::kFP16, s, list[i].mods});
    }
  }
  return cases;
}

// ScoreMods{causal, window_left, window_right, softcap, sinks, scale_multiplier}.
std::vector<ModCase> window_cases() {
  return cases_over_head_dims({
      {{false, 0, 0}, {1, 300, 113, 8, 2, 0}},        // the diagonal key only; q > k: rows 0..186 see none
      {{false, 1, 0}, {1, 257, 257, 8, 2, 0}},        // two keys a row, tails past 256
      {{false, 0, 1}, {2, 113, 300, 4, 4, 0}},        // MHA, q < k
      {{false, 37, 5}, {1, 333, 200, 8, 2, 0}},       // asymmetric; q > k: rows 0..127 see none
      {{false, 37, 5}, {1, 200, 333, 4, 4, 0}},       // asymmetric, q < k
      {{false, 1000, 1000}, {1, 257, 300, 8, 2, 0}},  // wider than both sequences: no mask at all
      {{false, 64, -1}, {1, 300, 300, 4, 4, 0}},      // a left bound only
      {{false, -1, 0}, {1, 200, 333, 8, 2, 0}},       // a right bound 0 without causal: the causal mask
      {{true, 100, -1}, {1, 400, 400, 8, 2, 0}},      // causal + left: (100, 0)
      {{true, 50, 7}, {1, 333, 200, 4, 4, 0}},        // causal makes window_right 7 mean 0; q > k
      {{true, 127, -1}, {1, 600, 600, 2, 1, 0}},      // MQA, a band across several tiles
  });
}

std::vector<ModCase> softcap_cases() {
  return cases_over_head_dims({
      {{false, -1, -1, 5.0f, false, 4.0f}, {1, 257, 257, 4, 4, 0}},  // scores about N(0, 16): deep in tanh's bend
      {{false, -1, -1, 50.0f}, {1, 129, 300, 8, 1, 0}},              // nearly linear, MQA
      {{true, -1, -1, 30.0f, false, 4.0f}, {1, 300, 113, 8, 2, 0}},  // causal, rows that see no key
      {{false, 37, 5, 50.0f, false, 4.0f}, {1, 200, 333, 8, 2, 0}},  // with a window
      {{true, 64, -1, 5.0f, false, 4.0f}, {2, 257, 257, 8, 2, 0}},   // GQA, a causal band
  });
}

std::vector<ModCase> sink_cases() {
  return cases_over_head_dims({
      {{false, -1, -1, 0.0f, true}, {1, 257, 257, 8, 2, 0}},         // alone
      {{false, -1, -1, 0.0f, true}, {1, 1, 1, 1, 1, 0}},             // one key: the sink takes its share
      {{true, -1, -1, 0.0f, true}, {1, 300, 113, 4, 4, 0}},          // causal, q > k: rows 0..186 see only the sink
      {{false, 0, 0, 0.0f, true}, {1, 300, 113, 8, 2, 0}},           // window (0, 0), q > k: the same rows
      {{false, 37, 5, 0.0f, true}, {2, 200, 200, 8, 2, 0}},          // a window, two batches summed into dsinks
      {{true, 64, -1, 0.0f, true}, {1, 333, 333, 4, 2, 0}},          // a causal band
      {{false, -1, -1, 5.0f, true, 4.0f}, {1, 257, 300, 8, 2, 0}},   // with a softcap
      {{true, 100, -1, 30.0f, true, 4.0f}, {1, 400, 257, 8, 2, 0}},  // all three; q > k
  });
}

class ScoreModAccuracy : public ::testing::TestWithParam<ModCase> {};

TEST_P(ScoreModAccuracy, ForwardAndBackwardMatchReference) {
  DASH_REQUIRE_SM90();
  const ModCase& c = GetParam();
  const bool has_forward = mods_compiled(Pass::kForward, c.dtype, c.shape.head_dim);
  const bool has_backward = mods_compiled(Pass::kBackward, c.dtype, c.shape.head_dim);
  const ProblemShape& s = c.shape;
  const ModProblem p(c, std::hash<std::string>{}(testing::mod_case_name(c)));
  const ModExpected e = testing::expected_results(p);
  ModRunner runner(p);
  if (has_forward) {
    SCOPED_TRACE("forward");
    runner.forward(p.options());
    const std::vector<uint16_t> out = runner.out_bits();
    const std::vector<float> lse = runner.lse();
    testing::expect_forward_accurate(p, e, out, lse);
    runner.forward(p.options());
    expect_same_bits(out, runner.out_bits(), {s.batch, s.seqlen_q, s.heads_q, s.head_dim}, "O rerun");
    EXPECT_TRUE(testing::bitwise_equal(lse, runner.lse(), {s.batch, s.heads_q, s.seqlen_q})) << "LSE rerun";
  }
  if (!has_backward) return;
  // The backward reads the reference's out and lse: its error is its own.
  runner.set_backward_inputs(e.exact_forward);
  for (const ScheduleKind kind : kBackwardSchedules) {
    SCOPED_TRACE("backward, schedule " + schedule_name(kind));
    runner.backward(p.options(kind));
    const ModGradients g = runner.gradients();
    testing::expect_gradients_accurate(c.dtype, g, e.exact, e.naive);
    if (p.sinks.empty()) continue;
    testing::expect_dsinks_accurate(c.dtype, g.dsinks, e.exact.dsinks, e.naive.dsinks);
    if (kind != ScheduleKind::kDescending) continue;
    // dsinks is optional: without it the other gradients keep their bits.
    runner.backward(p.options(kind), /*with_dsinks=*/false);
    const ModGradients without = runner.gradients();
    expect_same_bits(g.dq, without.dq, {s.batch, s.seqlen_q, s.heads_q, s.head_dim}, "dQ with vs without dsinks");
    expect_same_bits(g.dk, without.dk, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, "dK with vs without dsinks");
    expect_same_bits(g.dv, without.dv, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, "dV with vs without dsinks");
  }
}

std::string accuracy_name(const ::testing::TestParamInfo<ModCase>& info) {
  return testing::mod_case_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(Windows, ScoreModAccuracy, ::testing::ValuesIn(window_cases()), accuracy_name);
INSTANTIATE_TEST_SUITE_P(Softcap, ScoreModAccuracy, ::testing::ValuesIn(softcap_cases()), accuracy_name);
INSTANTIATE_TEST_SUITE_P(Sinks, ScoreModAccuracy, ::testing::ValuesIn(sink_cases()), accuracy_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ScoreModAccuracy);

// ------------------------------------------------------------------ varlen

struct VarlenModCase {
  DType dtype;
  int64_t head_dim;
  ScoreMods mods;
};

std::string varlen_name(const VarlenModCase& c) {
  return std::string(to_string(c.dtype)) + "_d" + std::to_string(c.head_dim) + "_" + testing::mods_name(c.mods);
}

void PrintTo(const VarlenModCase& c, std::ostream* out) { *out << varlen_name(c); }

// (seqlen_q, seqlen_k): no queries, no keys, 1, tile +- 1, q != k both ways
// (q > k: rows that see no key under the right bound), uneven.
const std::vector<std::pair<int64_t, int64_t>> kVarlenLengths{{0, 5},     {1, 1},     {63, 63},  {129, 129}, {300, 113},
                                                              {113, 300}, {5, 0},     {200, 200}, {17, 40}};

std::vector<int> iota_order(size_t n) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// A document without keys: out 0 and lse the sink in every row (and dq 0 with
// gradients); without queries: dk = dv = 0.
void expect_document_without_work(const DocumentBits& got, const std::vector<float>& sinks, int64_t seqlen_q,
                                  bool with_gradients) {
  const auto all_zero = [](const std::vector<uint16_t>& bits) {
    return std::all_of(bits.begin(), bits.end(), [](uint16_t b) { return (b & 0x7FFF) == 0; });
  };
  if (!with_gradients) {
    EXPECT_TRUE(all_zero(got.out)) << "O of a document without keys is not 0";
    for (size_t i = 0; i < got.lse.size(); ++i) {
      const float sink = sinks[i / std::max<int64_t>(seqlen_q, 1)];
      EXPECT_NEAR(got.lse[i], sink, 1e-5 * (1.0 + std::abs(sink))) << "LSE of a row without keys, flat index " << i;
    }
    return;
  }
  EXPECT_TRUE(all_zero(got.dq)) << "dQ of a document without keys is not 0";
  EXPECT_TRUE(all_zero(got.dk)) << "dK of a document without queries is not 0";
  EXPECT_TRUE(all_zero(got.dv)) << "dV of a document without queries is not 0";
}

void expect_same_document(const DocumentBits& expected, const DocumentBits& actual, int64_t seqlen_q,
                          int64_t seqlen_k, Heads h, bool with_gradients, const std::string& what) {
  if (!with_gradients) {
    expect_same_bits(expected.out, actual.out, {seqlen_q, h.q, h.dim}, "O, " + what);
    EXPECT_TRUE(testing::bitwise_equal(expected.lse, actual.lse, {h.q, seqlen_q})) << "LSE, " << what;
    return;
  }
  expect_same_bits(expected.dq, actual.dq, {seqlen_q, h.q, h.dim}, "dQ, " + what);
  expect_same_bits(expected.dk, actual.dk, {seqlen_k, h.kv, h.dim}, "dK, " + what);
  expect_same_bits(expected.dv, actual.dv, {seqlen_k, h.kv, h.dim}, "dV, " + what);
}

DocumentBits fixed_bits(const ModRunner& runner) {
  const ModGradients g = runner.gradients();
  return DocumentBits{runner.out_bits(), g.dq, g.dk, g.dv, runner.lse()};
}

template <class Element>
void run_varlen_case(const VarlenModCase& c) {
  const Heads h{8, 2, c.head_dim};
  const uint64_t seed = std::hash<std::string>{}(varlen_name(c));
  const auto docs = testing::make_documents<Element>(kVarlenLengths, h, seed, /*with_dout=*/true);
  std::mt19937_64 rng(seed + 1);
  const std::vector<float> sinks = testing::random_sinks(rng, h.q);
  const float scale = testing::mod_softmax_scale(c.mods, h.dim);
  const Options forward_options = testing::mod_options(c.mods, scale);

  // Each document with queries and keys as a problem of its own, and its references.
  std::vector<std::unique_ptr<ModProblem>> alone(docs.size());
  std::vector<std::future<ModExpected>> pending(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const testing::Document<Element>& d = docs[i];
    if (d.seqlen_q == 0 || d.seqlen_k == 0) continue;
    const ModCase mc{c.dtype, ProblemShape{1, d.seqlen_q, d.seqlen_k, h.q, h.kv, h.dim}, c.mods};
    alone[i] = std::make_unique<ModProblem>(mc, d.q_exact, d.k_exact, d.v_exact, d.dout_exact, sinks);
    pending[i] = std::async(std::launch::async, [&p = *alone[i]] { return testing::expected_results(p); });
  }

  // Packed after 3 rows of no sequence; reversed after 67 with seqused slack.
  const std::vector<int> order = iota_order(docs.size()), reversed(order.rbegin(), order.rend());
  VarlenModRunner<Element> packed(docs, order, 3, h, false, sinks);
  VarlenModRunner<Element> other(docs, reversed, 67, h, true, sinks);
  packed.forward(forward_options);
  other.forward(forward_options);
  const std::vector<DocumentBits> forward = packed.documents(), other_forward = other.documents();
  std::vector<ModExpected> want(docs.size());
  std::vector<std::unique_ptr<ModRunner>> fixed(docs.size());
  std::vector<double> exact_dsinks(h.q, 0.0), naive_dsinks(h.q, 0.0);
  for (size_t i = 0; i < docs.size(); ++i) {
    const int64_t lq = docs[i].seqlen_q, lk = docs[i].seqlen_k;
    SCOPED_TRACE("forward, document " + std::to_string(i) + " (seqlen_q " + std::to_string(lq) + ", seqlen_k " +
                 std::to_string(lk) + ")");
    expect_same_document(forward[i], other_forward[i], lq, lk, h, false, "reversed packing with seqused");
    if (!alone[i]) {
      if (lq > 0) expect_document_without_work(forward[i], sinks, lq, false);
      continue;
    }
    want[i] = pending[i].get();
    testing::expect_forward_accurate(*alone[i], want[i], forward[i].out, forward[i].lse);
    // The backward below reads this forward's out: the exact gradients for it.
    want[i].exact = testing::exact_gradients(*alone[i], testing::bits_to_double(c.dtype, forward[i].out));
    for (int64_t head = 0; head < h.q; ++head) {
      exact_dsinks[head] += want[i].exact.dsinks[head];
      naive_dsinks[head] += want[i].naive.dsinks[head];
    }
    // forward() on the document alone: the same bits; its backward reads them.
    fixed[i] = std::make_unique<ModRunner>(*alone[i]);
    fixed[i]->forward(forward_options);
    fixed[i]->use_forward_outputs();
    expect_same_document(forward[i], fixed_bits(*fixed[i]), lq, lk, h, false, "forward() alone");
  }

  for (const ScheduleKind kind : kBackwardSchedules) {
    SCOPED_TRACE("backward, schedule " + schedule_name(kind));
    const Options o = testing::mod_options(c.mods, scale, kind);
    packed.backward(o);
    EXPECT_EQ(packed.unowned_rows_wrong(), 0) << "rows of no sequence: out or gradients not zero";
    const std::vector<DocumentBits> got = packed.documents();
    const std::vector<float> dsinks = packed.dsinks();
    for (size_t i = 0; i < docs.size(); ++i) {
      SCOPED_TRACE("document " + std::to_string(i));
      if (alone[i])
        testing::expect_gradients_accurate(c.dtype, ModGradients{got[i].dq, got[i].dk, got[i].dv, {}}, want[i].exact,
                                           want[i].naive);
      else
        expect_document_without_work(got[i], sinks, docs[i].seqlen_q, true);
    }
    // dsinks sums over every sequence's rows.
    testing::expect_dsinks_accurate(c.dtype, dsinks, exact_dsinks, naive_dsinks);
    if (kind != ScheduleKind::kFA3 && kind != ScheduleKind::kDescending) continue;
    packed.backward(o);
    EXPECT_TRUE(testing::bitwise_equal(dsinks, packed.dsinks(), {h.q})) << "dsinks rerun";
    other.backward(o);
    EXPECT_EQ(other.unowned_rows_wrong(), 0) << "rows of no sequence (reversed packing)";
    const std::vector<DocumentBits> other_got = other.documents();
    for (size_t i = 0; i < docs.size(); ++i) {
      const int64_t lq = docs[i].seqlen_q, lk = docs[i].seqlen_k;
      SCOPED_TRACE("document " + std::to_string(i));
      expect_same_document(got[i], other_got[i], lq, lk, h, true, "reversed packing with seqused");
      if (!fixed[i]) continue;
      fixed[i]->backward(o);
      expect_same_document(got[i], fixed_bits(*fixed[i]), lq, lk, h, true, "backward() alone");
    }
  }
}

class ScoreModVarlen : public ::testing::TestWithParam<VarlenModCase> {};

TEST_P(ScoreModVarlen, MatchesReferencePerSequenceAndIgnoresPacking) {
  DASH_REQUIRE_SM90();
  if (GetParam().dtype == DType::kBF16)
    run_varlen_case<__nv_bfloat16>(GetParam());
  else
    run_varlen_case<__half>(GetParam());
}

std::vector<VarlenModCase> varlen_cases() {
  const ScoreMods mods[] = {
      {false, 37, 5, 30.0f, true, 4.0f},  // both bounds (rows of the q > k document see no key), softcap, sinks
      {true, 64, -1, 5.0f, true, 4.0f},   // a causal band, a small softcap, sinks
  };
  std::vector<VarlenModCase> cases;
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int64_t d : {64, 128, 256})
      if (compiled_both(dtype, d))
        for (const ScoreMods& m : mods) cases.push_back({dtype, d, m});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Varlen, ScoreModVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const ::testing::TestParamInfo<VarlenModCase>& info) { return varlen_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ScoreModVarlen);

// ------------------------------------------------------------- determinism

// A windowed causal shape with softcap and sinks; out and lse from the
// library's forward (the fp64 reference would take minutes here).
class ScoreModDeterminism : public ::testing::TestWithParam<ScheduleKind> {
 protected:
  void SetUp() override {
    DASH_REQUIRE_SM90();
    if (!compiled_both(DType::kBF16, 128)) GTEST_SKIP() << "bf16 hdim 128 score-mod kernels not compiled for both passes";
    const ModCase c{DType::kBF16, ProblemShape{2, 1000, 1000, 8, 2, 128}, ScoreMods{true, 255, -1, 30.0f, true}};
    problem_ = std::make_unique<ModProblem>(c, 0x5eed);
    runner_ = std::make_unique<ModRunner>(*problem_);
    runner_->forward(problem_->options());
    runner_->use_forward_outputs();
    runner_->backward(options());
    first_ = runner_->gradients();
  }

  Options options(int max_ctas = 0) const { return problem_->options(GetParam(), max_ctas); }

  void expect_same_as_first(const std::string& what) const {
    const ModGradients g = runner_->gradients();
    const ProblemShape& s = problem_->c.shape;
    expect_same_bits(first_.dq, g.dq, {s.batch, s.seqlen_q, s.heads_q, s.head_dim}, "dQ, " + what);
    expect_same_bits(first_.dk, g.dk, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, "dK, " + what);
    expect_same_bits(first_.dv, g.dv, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, "dV, " + what);
    EXPECT_TRUE(testing::bitwise_equal(first_.dsinks, g.dsinks, {s.heads_q})) << "dsinks, " << what;
  }

  std::unique_ptr<ModProblem> problem_;
  std::unique_ptr<ModRunner> runner_;
  ModGradients first_;
};

// Five more runs on the same workspace (outputs poisoned, workspace not).
TEST_P(ScoreModDeterminism, FiveRerunsBitwiseEqual) {
  for (int r = 1; r <= 5; ++r) {
    runner_->backward(options(), /*with_dsinks=*/true, /*poison_workspace=*/false);
    expect_same_as_first("rerun " + std::to_string(r));
  }
}

// fa3 and descending run on any grid: every cap gives the full grid's bits.
TEST_P(ScoreModDeterminism, GridCapInvariant) {
  int sms = 0;
  DASH_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int cap : {1, 2, 7, 66, sms}) {
    runner_->backward(options(cap));
    expect_same_as_first("max_ctas " + std::to_string(cap));
  }
}

INSTANTIATE_TEST_SUITE_P(Window, ScoreModDeterminism, ::testing::Values(ScheduleKind::kFA3, ScheduleKind::kDescending),
                         [](const ::testing::TestParamInfo<ScheduleKind>& info) { return schedule_name(info.param); });

// ---------------------------------------------------------------- refusals

// A small GQA problem with sinks (and a varlen batch of it) on the first bf16
// head dim compiled for both passes; each refusal must name its argument and
// write no output.
class ScoreModRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    DASH_REQUIRE_SM90();
    for (int64_t d : {64, 128, 256})
      if (compiled_both(DType::kBF16, d)) {
        head_dim_ = d;
        break;
      }
    if (head_dim_ == 0) GTEST_SKIP() << "no bf16 head dim with score-mod kernels for both passes";
    const ModCase c{DType::kBF16, ProblemShape{1, 128, 128, 4, 2, head_dim_}, ScoreMods{false, -1, -1, 0.0f, true}};
    problem_ = std::make_unique<ModProblem>(c, 3);
    runner_ = std::make_unique<ModRunner>(*problem_);
    runner_->forward(problem_->options());
    runner_->use_forward_outputs();
    const Heads h{4, 2, head_dim_};
    docs_ = testing::make_documents<__nv_bfloat16>({{100, 100}, {0, 30}, {65, 129}}, h, 9, /*with_dout=*/true);
    std::mt19937_64 rng(4);
    varlen_ = std::make_unique<VarlenModRunner<__nv_bfloat16>>(docs_, iota_order(docs_.size()), 2, h, false,
                                                                 testing::random_sinks(rng, h.q));
    varlen_->forward(problem_->options());
  }

  Options options(const ScoreMods& m, ScheduleKind kind = ScheduleKind::kDescending) const {
    return testing::mod_options(m, problem_->scale, kind);
  }

  // `call` must throw dash_attn::Error with `code`, its message naming
  // `argument`, and leave every output of the fixed runner poisoned.
  template <class Call>
  void expect_refused(Call call, ErrorCode code, const std::string& argument) {
    runner_->poison_outputs();
    DASH_TEST_CUDA(cudaDeviceSynchronize());
    try {
      call();
      ADD_FAILURE() << "accepted; expected dash_attn::Error naming " << argument;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(argument), std::string::npos)
          << "the message does not name " << argument << ": " << e.what();
    }
    DASH_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_TRUE(runner_->outputs_poisoned()) << "a refused call wrote an output";
  }

  int64_t head_dim_ = 0;
  std::unique_ptr<ModProblem> problem_;
  std::unique_ptr<ModRunner> runner_;
  std::vector<testing::Document<__nv_bfloat16>> docs_;
  std::unique_ptr<VarlenModRunner<__nv_bfloat16>> varlen_;
};

// The wave schedules' chains and ranks assume no window (resolve.hpp, supports_window).
TEST_F(ScoreModRefusals, WaveSchedulesWithWindowNameTheSchedule) {
  const ScoreMods windows[] = {{true, 32, -1}, {false, 16, 16}, {false, 0, 0}};
  for (const ScoreMods& m : windows)
    for (ScheduleKind kind : {ScheduleKind::kShift, ScheduleKind::kSymmetricShift}) {
      SCOPED_TRACE(schedule_name(kind) + ", " + testing::mods_name(m));
      // A workspace large enough for a schedule that takes windows: the refusal must be the schedule's.
      const BackwardArgs a = runner_->backward_args(options(m));
      const Options o = options(m, kind);
      expect_refused([&] { backward(a, o, nullptr); }, ErrorCode::kNotSupported, "options.schedule");
      expect_refused([&] { backward_workspace_size(a.shape, o); }, ErrorCode::kNotSupported, "options.schedule");
    }
}

TEST_F(ScoreModRefusals, WindowBoundBelowMinusOneNamesTheBound) {
  const std::pair<ScoreMods, const char*> bad[] = {{{false, -2, -1}, "options.window_left"},
                                                   {{true, -100, -1}, "options.window_left"},
                                                   {{false, 5, -2}, "options.window_right"}};
  for (const auto& entry : bad) {
    const ScoreMods& m = entry.first;
    const std::string argument = entry.second;
    SCOPED_TRACE(argument + " = " + std::to_string(m.window_left) + ", " + std::to_string(m.window_right));
    const BackwardArgs a = runner_->backward_args(options(ScoreMods{}));
    expect_refused([&] { forward(runner_->forward_args(), options(m), nullptr); }, ErrorCode::kInvalidArgument, argument);
    expect_refused([&] { backward(a, options(m), nullptr); }, ErrorCode::kInvalidArgument, argument);
  }
}

TEST_F(ScoreModRefusals, NegativeOrNonFiniteSoftcapNamesSoftcap) {
  for (float cap : {-1.0f, -30.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE("softcap " + std::to_string(cap));
    ScoreMods m;
    m.softcap = cap;
    const BackwardArgs a = runner_->backward_args(options(ScoreMods{}));
    expect_refused([&] { forward(runner_->forward_args(), options(m), nullptr); }, ErrorCode::kInvalidArgument,
                   "options.softcap");
    expect_refused([&] { backward(a, options(m), nullptr); }, ErrorCode::kInvalidArgument, "options.softcap");
  }
}

// sinks and dsinks are fp32 arrays: a pointer off a 4-byte boundary is refused
// by name, and dsinks needs the sinks it is the gradient of.
TEST_F(ScoreModRefusals, MisalignedSinksNameTheirArgument) {
  const testing::DeviceBuffer<float> spare(problem_->c.shape.heads_q + 1);
  float* misaligned = reinterpret_cast<float*>(reinterpret_cast<char*>(spare.get()) + 2);
  const Options o = options(ScoreMods{});
  ForwardArgs f = runner_->forward_args();
  f.sinks = misaligned;
  expect_refused([&] { forward(f, o, nullptr); }, ErrorCode::kInvalidArgument, "'sinks'");
  BackwardArgs b = runner_->backward_args(o);
  b.sinks = misaligned;
  expect_refused([&] { backward(b, o, nullptr); }, ErrorCode::kInvalidArgument, "'sinks'");
  b = runner_->backward_args(o);
  b.dsinks = misaligned;
  expect_refused([&] { backward(b, o, nullptr); }, ErrorCode::kInvalidArgument, "'dsinks'");
  b = runner_->backward_args(o);
  b.sinks = nullptr;
  expect_refused([&] { backward(b, o, nullptr); }, ErrorCode::kInvalidArgument, "'dsinks'");

  VarlenForwardArgs vf = varlen_->forward_args();
  vf.sinks = misaligned;
  expect_refused([&] { forward_varlen(vf, o, nullptr); }, ErrorCode::kInvalidArgument, "'sinks'");
  VarlenBackwardArgs vb = varlen_->backward_args(o);
  vb.sinks = misaligned;
  expect_refused([&] { backward_varlen(vb, o, nullptr); }, ErrorCode::kInvalidArgument, "'sinks'");
  vb = varlen_->backward_args(o);
  vb.dsinks = misaligned;
  expect_refused([&] { backward_varlen(vb, o, nullptr); }, ErrorCode::kInvalidArgument, "'dsinks'");
}

}  // namespace
}  // namespace dash_attn
