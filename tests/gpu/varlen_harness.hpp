// Shared by the varlen GPU tests (test_forward_varlen.cu, test_backward_varlen.cu):
// documents (one sequence's values, dense (seq, head, dim) per sequence),
// their packing into FlashAttention's varlen layout (padding rows before the
// first sequence, optional seqused slack after each, rows of no sequence at
// the end, random values in every row of no sequence), the device copies, and
// the per-document slices of packed results read back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "dash_attn/types.hpp"
#include "gpu_support.hpp"

namespace dash_attn::testing {

struct Heads {
  int64_t q, kv, dim;
};

template <class Element>
constexpr DType dtype_of() {
  return std::is_same_v<Element, __half> ? DType::kFP16 : DType::kBF16;
}

// One document: its q and k lengths and its values (dense per sequence,
// (seq, head, dim)) in the device type and as doubles. dout is empty unless
// make_documents was asked for it.
template <class Element>
struct Document {
  int64_t seqlen_q = 0, seqlen_k = 0;
  std::vector<Element> q, k, v, dout;
  std::vector<double> q_exact, k_exact, v_exact, dout_exact;
};

// Per document, q, k, v (and dout when with_dout) from one generator, in that
// order: the values of a document do not depend on with_dout.
template <class Element>
std::vector<Document<Element>> make_documents(const std::vector<std::pair<int64_t, int64_t>>& lengths, Heads h,
                                              uint64_t seed, bool with_dout = false) {
  std::mt19937_64 rng(seed);
  std::vector<Document<Element>> docs;
  for (const auto& [lq, lk] : lengths) {
    Document<Element> d;
    d.seqlen_q = lq;
    d.seqlen_k = lk;
    random_tensor(rng, lq * h.q * h.dim, d.q, d.q_exact);
    random_tensor(rng, lk * h.kv * h.dim, d.k, d.k_exact);
    random_tensor(rng, lk * h.kv * h.dim, d.v, d.v_exact);
    if (with_dout) random_tensor(rng, lq * h.q * h.dim, d.dout, d.dout_exact);
    docs.push_back(std::move(d));
  }
  return docs;
}

// Where the sequences of one packing sit. Slot s holds document order[s]; its
// rows start at cu_q[s] / cu_k[s]. With seqused each slot is 3 rows longer than
// the document (the slack belongs to no sequence); 7 rows of no sequence follow
// the last slot, `lead` rows precede the first.
struct VarlenLayout {
  std::vector<int> order;
  bool use_seqused = false;
  std::vector<int32_t> cu_q, cu_k;      // batch + 1 entries
  std::vector<int32_t> used_q, used_k;  // batch entries: the documents' lengths
  int64_t max_q = 1, max_k = 1, total_q = 0, total_k = 0;
  std::vector<char> owned_q, owned_k;  // per packed row: inside some sequence's used length
  int64_t batch() const { return static_cast<int64_t>(order.size()); }
};

template <class Element>
VarlenLayout varlen_layout(const std::vector<Document<Element>>& docs, const std::vector<int>& order, int64_t lead,
                           bool use_seqused) {
  VarlenLayout l;
  l.order = order;
  l.use_seqused = use_seqused;
  l.cu_q = {static_cast<int32_t>(lead)};
  l.cu_k = {static_cast<int32_t>(lead)};
  const int64_t slack = use_seqused ? 3 : 0;
  for (int i : order) {
    l.cu_q.push_back(static_cast<int32_t>(l.cu_q.back() + docs[i].seqlen_q + slack));
    l.cu_k.push_back(static_cast<int32_t>(l.cu_k.back() + docs[i].seqlen_k + slack));
    l.used_q.push_back(static_cast<int32_t>(docs[i].seqlen_q));
    l.used_k.push_back(static_cast<int32_t>(docs[i].seqlen_k));
    l.max_q = std::max(l.max_q, docs[i].seqlen_q + slack);
    l.max_k = std::max(l.max_k, docs[i].seqlen_k + slack);
  }
  l.total_q = l.cu_q.back() + 7;  // trailing rows of no sequence
  l.total_k = l.cu_k.back() + 7;
  l.owned_q.assign(l.total_q, 0);
  l.owned_k.assign(l.total_k, 0);
  for (size_t slot = 0; slot < order.size(); ++slot) {
    for (int64_t r = 0; r < docs[order[slot]].seqlen_q; ++r) l.owned_q[l.cu_q[slot] + r] = 1;
    for (int64_t r = 0; r < docs[order[slot]].seqlen_k; ++r) l.owned_k[l.cu_k[slot] + r] = 1;
  }
  return l;
}

// One packed (total, row) tensor: each slot's document at its rows, random
// values (from `filler`) in the rows of no sequence (owned[r] == 0), which
// must not leak into any result.
template <class Element>
std::vector<Element> pack_tensor(const std::vector<Document<Element>>& docs, const VarlenLayout& l,
                                 std::vector<Element> Document<Element>::*member, const std::vector<int32_t>& cu,
                                 const std::vector<char>& owned, int64_t row, std::mt19937_64& filler) {
  std::vector<Element> packed(owned.size() * row);
  for (size_t slot = 0; slot < l.order.size(); ++slot) {
    const std::vector<Element>& rows = docs[l.order[slot]].*member;
    std::copy(rows.begin(), rows.end(), packed.begin() + cu[slot] * row);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t r = 0; r < owned.size(); ++r)
    if (!owned[r])
      for (int64_t e = 0; e < row; ++e) packed[r * row + e] = Element(normal(filler));
  return packed;
}

// The documents packed on the device: q, k, v (and dout when every document
// has one), cu_seqlens and seqused, and the views of FlashAttention's varlen
// layout: tensors (total, heads, head_dim), lse-like arrays (heads_q, total_q).
template <class Element>
class PackedBatch {
 public:
  PackedBatch(const std::vector<Document<Element>>& docs, const std::vector<int>& order, int64_t lead, Heads h,
              bool use_seqused)
      : h_(h),
        layout_(varlen_layout(docs, order, lead, use_seqused)),
        has_dout_(std::all_of(docs.begin(), docs.end(),
                              [](const Document<Element>& d) { return d.dout.size() == d.q.size(); })),
        q_(layout_.total_q * row_q()),
        k_(layout_.total_k * row_k()),
        v_(layout_.total_k * row_k()),
        dout_(has_dout_ ? layout_.total_q * row_q() : 1),
        cu_q_(layout_.cu_q.size()),
        cu_k_(layout_.cu_k.size()),
        used_q_(std::max<size_t>(layout_.used_q.size(), 1)),
        used_k_(std::max<size_t>(layout_.used_k.size(), 1)) {
    std::mt19937_64 filler(99);
    q_.upload(pack_tensor(docs, layout_, &Document<Element>::q, layout_.cu_q, layout_.owned_q, row_q(), filler));
    k_.upload(pack_tensor(docs, layout_, &Document<Element>::k, layout_.cu_k, layout_.owned_k, row_k(), filler));
    v_.upload(pack_tensor(docs, layout_, &Document<Element>::v, layout_.cu_k, layout_.owned_k, row_k(), filler));
    if (has_dout_)
      dout_.upload(pack_tensor(docs, layout_, &Document<Element>::dout, layout_.cu_q, layout_.owned_q, row_q(), filler));
    cu_q_.upload(layout_.cu_q);
    cu_k_.upload(layout_.cu_k);
    if (!layout_.used_q.empty()) used_q_.upload(layout_.used_q);
    if (!layout_.used_k.empty()) used_k_.upload(layout_.used_k);
  }

  const VarlenLayout& layout() const { return layout_; }
  const Heads& heads() const { return h_; }
  int64_t row_q() const { return h_.q * h_.dim; }
  int64_t row_k() const { return h_.kv * h_.dim; }
  size_t q_elements() const { return static_cast<size_t>(layout_.total_q * row_q()); }
  size_t k_elements() const { return static_cast<size_t>(layout_.total_k * row_k()); }
  size_t lse_elements() const { return static_cast<size_t>(h_.q * layout_.total_q); }

  // batch = sequences, seqlen_q / seqlen_k = the longest slots.
  ProblemShape shape() const {
    return ProblemShape{layout_.batch(), layout_.max_q, layout_.max_k, h_.q, h_.kv, h_.dim};
  }
  VarlenLengths lengths() const {
    return VarlenLengths{layout_.total_q,
                         layout_.total_k,
                         cu_q_.get(),
                         cu_k_.get(),
                         layout_.use_seqused ? used_q_.get() : nullptr,
                         layout_.use_seqused ? used_k_.get() : nullptr};
  }

  // Views of packed buffers laid out like q (heads_q rows), like k, like lse.
  TensorView packed_q(void* data) const { return TensorView{data, 0, row_q(), h_.dim, 1}; }
  TensorView packed_k(void* data) const { return TensorView{data, 0, row_k(), h_.dim, 1}; }
  LseView packed_lse(float* data) const { return LseView{data, 0, layout_.total_q}; }
  TensorView q() const { return packed_q(q_.get()); }
  TensorView k() const { return packed_k(k_.get()); }
  TensorView v() const { return packed_k(v_.get()); }
  TensorView dout() const { return packed_q(has_dout_ ? dout_.get() : nullptr); }

  VarlenForwardArgs forward_args(void* out, float* lse) const {
    VarlenForwardArgs a;
    a.shape = shape();
    a.lengths = lengths();
    a.dtype = dtype_of<Element>();
    a.q = q();
    a.k = k();
    a.v = v();
    a.out = packed_q(out);
    a.lse = packed_lse(lse);
    return a;
  }

 private:
  Heads h_;
  VarlenLayout layout_;
  bool has_dout_;
  DeviceBuffer<Element> q_, k_, v_, dout_;
  DeviceBuffer<int32_t> cu_q_, cu_k_, used_q_, used_k_;
};

// Rows [first_row, first_row + rows) of a packed (total, row) host tensor of a
// 16-bit type, as raw bits, dense (seq, head, dim).
template <class T>
std::vector<uint16_t> slot_bits(const std::vector<T>& packed, int64_t first_row, int64_t rows, int64_t row) {
  static_assert(sizeof(T) == sizeof(uint16_t), "16-bit elements");
  std::vector<uint16_t> bits(static_cast<size_t>(rows * row));
  if (!bits.empty()) std::memcpy(bits.data(), packed.data() + first_row * row, bits.size() * sizeof(uint16_t));
  return bits;
}

// Rows [first_row, first_row + rows) of a packed (heads, total) lse-like array, as (head, seq).
inline std::vector<float> slot_lse(const std::vector<float>& packed, int64_t total, int64_t heads, int64_t first_row,
                                   int64_t rows) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(heads * rows));
  for (int64_t head = 0; head < heads; ++head)
    for (int64_t i = 0; i < rows; ++i) out.push_back(packed[head * total + first_row + i]);
  return out;
}

// Rows r with owned[r] == 0 (no sequence's) with a nonzero element: the
// varlen passes write zero out and gradients there (api.hpp).
template <class T>
int64_t unowned_rows_not_zero(const std::vector<T>& packed, const std::vector<char>& owned, int64_t row) {
  static_assert(sizeof(T) == sizeof(uint16_t), "16-bit elements");
  int64_t written = 0;
  for (size_t r = 0; r < owned.size(); ++r) {
    if (owned[r]) continue;
    for (int64_t e = 0; e < row; ++e) {
      uint16_t bits;
      std::memcpy(&bits, &packed[r * row + e], sizeof bits);
      if (bits != 0) {
        ++written;
        break;
      }
    }
  }
  return written;
}

}  // namespace dash_attn::testing
