// Online softmax on wgmma accumulators, in base 2 with the softmax scale
// folded into one FFMA per score: p = exp2(s * scale * log2(e) - m * scale * log2(e)).
// Each thread of an m64nNk16 wgmma holds two rows of the 64-row tile; the
// other three threads of its quad hold the rest of those rows.
#pragma once

#include <cute/tensor.hpp>

#include <cmath>

#include "dash_attn/mask/mask_geometry.hpp"
#include "kernels/sm90/common/exp2_approx.hpp"

namespace dash_attn::sm90::fwd {

// ((2 cols, 2 rows, N/8 col groups), MMA_M, MMA_N) -> ((2 rows, MMA_M), (2 cols, N/8, MMA_N)).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_rows_cols(Layout const& acc) {
  using namespace cute;
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

template <class Tensor>
CUTE_DEVICE auto rows_cols_view(Tensor&& t) {
  return cute::make_tensor(t.data(), accumulator_rows_cols(t.layout()));
}

// Sets to -inf every score the mask hides from its row: key columns at or
// past the row's mask::MaskGeometry::key_limit_none_or_causal (the seqlen_k
// tail and, under the bottom-right causal mask, keys past the row's
// diagonal); kWindow (the ScoreMods kernels): the row's visible keys
// [col_begin, key_limit) of any window.
template <bool kWindow, class TensorS, class TensorCoord>
CUTE_DEVICE void apply_mask(TensorS& scores, TensorCoord const& coords, int row_offset, int col_offset,
                            const mask::MaskGeometry& geometry) {
  using namespace cute;
  auto s = rows_cols_view(scores);
  auto c = rows_cols_view(coords);
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = row_offset + get<0>(c(r, 0));
    const int limit = kWindow ? geometry.key_limit(row) : geometry.key_limit_none_or_causal(row);
    const int first = kWindow ? geometry.col_begin(row) : 0;
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int col = col_offset + get<1>(c(r, j));
      if (col >= limit || (kWindow && col < first)) s(r, j) = -INFINITY;
    }
  }
}

template <int kRows>
struct OnlineSoftmax {
  static constexpr int kRowsPerThread = kRows;
  float scale_log2;
  float row_max[kRows];
  float row_sum[kRows];  // this thread's partial sum; reduced over the quad at the end

  CUTE_DEVICE explicit OnlineSoftmax(float scale_log2_) : scale_log2(scale_log2_) { reset(); }

  CUTE_DEVICE void reset() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.0f;
  }

  // Scores -> unnormalised probabilities, in place. Returns through `rescale`
  // the factor by which earlier rows of O and the running sum must shrink.
  // (hdim 64: one pass; hdim 128 / 256 use the two halves below,
  // FwdTraits::kSoftmaxUnderPv.)
  template <class TensorS>
  CUTE_DEVICE void update(TensorS& scores, float (&rescale)[kRows]) {
    using namespace cute;
    auto s = rows_cols_view(scores);
    static_assert(decltype(size<0>(s))::value == kRows);
    constexpr int kCols = decltype(size<1>(s))::value;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float m = new_row_max(s, r);
      const float m_scaled = scaled_max(m);
      rescale[r] = exp2_approx(row_max[r] * scale_log2 - m_scaled);
      row_max[r] = m;
      float partial[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f};
      CUTE_UNROLL
      for (int j = 0; j < kCols; ++j) {
        s(r, j) = exp2_approx(s(r, j) * scale_log2 - m_scaled);
        partial[j % kLanes] += s(r, j);
      }
      row_sum[r] = row_sum[r] * rescale[r] + ((partial[0] + partial[1]) + (partial[2] + partial[3]));
    }
  }

  // The first half of update: the rows' new maxima, `rescale`, and each
  // score's exp2 argument s * scale_log2 - m * scale_log2 in place. Needs no
  // O, so it can run while O += P V does (the mainloop waits after it).
  template <class TensorS>
  CUTE_DEVICE void update_maxima(TensorS& scores, float (&rescale)[kRows]) {
    using namespace cute;
    auto s = rows_cols_view(scores);
    static_assert(decltype(size<0>(s))::value == kRows);
    constexpr int kCols = decltype(size<1>(s))::value;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float m = new_row_max(s, r);
      const float m_scaled = scaled_max(m);
      // Exactly 1 when the maximum stays, so that the mainloop can skip
      // rescaling O (the FFMA below can leave a rounding residue there).
      rescale[r] = m == row_max[r] ? 1.0f : exp2_approx(row_max[r] * scale_log2 - m_scaled);
      row_max[r] = m;
      CUTE_UNROLL
      for (int j = 0; j < kCols; ++j) s(r, j) = s(r, j) * scale_log2 - m_scaled;
    }
  }

  // The second half: the exponentials and the running sums.
  template <class TensorS>
  CUTE_DEVICE void exponentiate(TensorS& scores, float const (&rescale)[kRows]) {
    using namespace cute;
    auto s = rows_cols_view(scores);
    constexpr int kCols = decltype(size<1>(s))::value;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float partial[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f};
      CUTE_UNROLL
      for (int j = 0; j < kCols; ++j) {
        s(r, j) = exp2_approx(s(r, j));
        partial[j % kLanes] += s(r, j);
      }
      row_sum[r] = row_sum[r] * rescale[r] + ((partial[0] + partial[1]) + (partial[2] + partial[3]));
    }
  }

  // Four independent partial maxima and sums: the reductions are chains of
  // dependent instructions otherwise.
  static constexpr int kLanes = 4;

  // Row r's maximum over the running one and this tile's scores (the quad's
  // four lanes hold the row).
  template <class RowsCols>
  CUTE_DEVICE float new_row_max(RowsCols& s, int r) const {
    using namespace cute;
    constexpr int kCols = decltype(size<1>(s))::value;
    static_assert(kCols % kLanes == 0);
    float partial[kLanes];
    CUTE_UNROLL
    for (int i = 0; i < kLanes; ++i) partial[i] = s(r, i);
    CUTE_UNROLL
    for (int j = kLanes; j < kCols; ++j) partial[j % kLanes] = fmaxf(partial[j % kLanes], s(r, j));
    float m = fmaxf(fmaxf(row_max[r], fmaxf(partial[0], partial[1])), fmaxf(partial[2], partial[3]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  }

  // A row with no visible key yet keeps m = -inf; subtracting 0 instead
  // keeps every exp2 argument -inf (p = 0) rather than NaN.
  CUTE_DEVICE float scaled_max(float m) const { return m == -INFINITY ? 0.0f : m * scale_log2; }

  // 1 / rowsum for O (0 for a fully masked row, whose O is then 0) and the
  // natural-log LSE (-inf for a fully masked row).
  CUTE_DEVICE void finalize(float (&inverse_sum)[kRows], float (&lse)[kRows]) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum = row_sum[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const bool empty = sum == 0.0f;
      inverse_sum[r] = empty ? 0.0f : 1.0f / sum;
      lse[r] = empty ? -INFINITY : (row_max[r] * scale_log2 + __log2f(sum)) * static_cast<float>(M_LN2);
    }
  }
};

// finalize with a sink: the logit `sink` (natural units, not scaled or
// capped) joins every row's denominator and carries no value, so
// lse = log(exp(sink) + sum_j exp(s_j)). Both terms are taken relative to
// the larger of the row's maximum and the sink, so neither overflows; a row
// that sees no key gets O = 0 and lse = sink. A free function, so that the
// Plain kernels' OnlineSoftmax stays as measured.
template <class Softmax, int kRows>
CUTE_DEVICE void finalize_with_sink(Softmax& softmax, float sink, float (&inverse_sum)[kRows], float (&lse)[kRows]) {
  const float sink_log2 = sink * static_cast<float>(M_LOG2E);
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    float sum = softmax.row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float row_max = softmax.row_max[r] == -INFINITY ? -INFINITY : softmax.row_max[r] * softmax.scale_log2;
    const float top = fmaxf(row_max, sink_log2);
    if (top == -INFINITY) {  // no visible key and a sink of -inf: as without sinks
      inverse_sum[r] = 0.0f;
      lse[r] = -INFINITY;
      continue;
    }
    const float kept = exp2_approx(row_max - top);  // 0 for a row without keys
    const float total = sum * kept + exp2_approx(sink_log2 - top);
    inverse_sum[r] = kept / total;
    lse[r] = (top + __log2f(total)) * static_cast<float>(M_LN2);
  }
}

// Whether any row of the warp must rescale O (a warp-uniform answer).
template <int kRows>
CUTE_DEVICE bool any_row_rescaled(float const (&factor)[kRows]) {
  bool any = false;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) any |= factor[r] != 1.0f;
  return __any_sync(0xffffffffu, any);
}

template <class TensorO, int kRows>
CUTE_DEVICE void scale_rows(TensorO& acc, float const (&factor)[kRows]) {
  using namespace cute;
  auto o = rows_cols_view(acc);
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    CUTE_UNROLL
    for (int j = 0; j < size<1>(o); ++j) o(r, j) *= factor[r];
  }
}

}  // namespace dash_attn::sm90::fwd
