// Forward epilogue: O = acc / rowsum in the input type and the natural-log
// LSE, stored straight from the consumer registers. Each quad of threads
// writes whole 32-byte sectors of a row, and rows beyond seqlen_q are simply
// not stored, so arbitrary strides and tails need no TMA store or padding.
#pragma once

#include <cutlass/array.h>

#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/types.hpp"
#include "fwd_softmax_sm90.hpp"
#include "fwd_traits_sm90.hpp"

namespace dash_attn::sm90::fwd {

template <class Traits>
struct FwdEpilogueSm90 {
  using Element = typename Traits::Element;

  struct Params {
    Element* out;
    int64_t out_batch_stride, out_seq_stride, out_head_stride;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride;
    const float* sinks;  // heads_q logits or null (kScoreMods only)
  };

  static Params to_params(ForwardArgs const& a) {
    return Params{static_cast<Element*>(a.out.data), a.out.batch_stride, a.out.seq_stride, a.out.head_stride,
                  a.lse.data, a.lse.batch_stride, a.lse.head_stride, a.sinks};
  }

  // Where the tile's (batch, head) rows start in out and lse; in a varlen
  // batch its sequence's rows of the packed tensors.
  static CUTE_DEVICE Element* out_origin(Params const& p, schedule::ForwardWorkTile const& work) {
    return p.out + work.batch * p.out_batch_stride + work.head * p.out_head_stride;
  }
  static CUTE_DEVICE float* lse_origin(Params const& p, schedule::ForwardWorkTile const& work) {
    return p.lse + work.batch * p.lse_batch_stride + work.head * p.lse_head_stride;
  }
  static CUTE_DEVICE Element* out_origin(Params const& p, schedule::VarlenForwardWork const& work) {
    return p.out + work.q_offset * p.out_seq_stride + work.head * p.out_head_stride;
  }
  static CUTE_DEVICE float* lse_origin(Params const& p, schedule::VarlenForwardWork const& work) {
    return p.lse + work.head * p.lse_head_stride + work.q_offset;
  }

  // Masks: as in the mainloop (its mask_geometry() has the rows' seqlen_q).
  template <class Masks, class Work, class FragO, class Softmax>
  static CUTE_DEVICE void store(Params const& p, Masks const& masks, int thread_idx, Work const& work, FragO& tOrO,
                                Softmax& softmax) {
    using namespace cute;
    constexpr int kRows = Softmax::kRowsPerThread;
    float inverse_sum[kRows], lse[kRows];
    if constexpr (Traits::kScoreMods) {
      if (p.sinks != nullptr)
        finalize_with_sink(softmax, p.sinks[work.head], inverse_sum, lse);
      else
        softmax.finalize(inverse_sum, lse);
    } else {
      softmax.finalize(inverse_sum, lse);
    }
    typename Traits::TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(thread_idx)
                      .partition_C(make_identity_tensor(Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{}));
    auto o = rows_cols_view(tOrO);
    auto coords = rows_cols_view(tOcO);
    Element* out = out_origin(p, work);
    float* lse_out = lse_origin(p, work);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = work.m_block * Traits::kBlockM + get<0>(coords(r, 0));
      if (row >= masks.mask_geometry().seqlen_q) continue;
      Element* out_row = out + row * p.out_seq_stride;
      // Columns j and j + 1 of the view are adjacent in memory: one 4-byte store.
      CUTE_UNROLL
      for (int j = 0; j < size<1>(o); j += 2) {
        cutlass::Array<Element, 2> pair;
        pair[0] = static_cast<Element>(o(r, j) * inverse_sum[r]);
        pair[1] = static_cast<Element>(o(r, j + 1) * inverse_sum[r]);
        *reinterpret_cast<cutlass::Array<Element, 2>*>(out_row + get<1>(coords(r, j))) = pair;
      }
      if (thread_idx % 4 == 0) lse_out[row] = lse[r];
    }
  }
};

}  // namespace dash_attn::sm90::fwd
