#include "bench/cases.hpp"

#include <algorithm>

namespace dash_attn::bench {

std::vector<BenchCase> bench_cases(const BenchOptions& options) {
  std::vector<BenchCase> cases;
  if (!options.shapes.empty()) {
    for (const ProblemShape& shape : options.shapes)
      for (const bool causal : options.masks)
        cases.push_back(BenchCase{shape, causal, options.mods, options.q_heads_per_chain});
    return cases;
  }
  for (const int head_dim : options.head_dims)
    for (const bool causal : options.masks)
      for (const int seqlen : options.seqlens) {
        const int heads = std::max(1, kGridHidden / head_dim);
        cases.push_back(BenchCase{ProblemShape{kGridTokens / seqlen, seqlen, seqlen, heads, heads, head_dim}, causal,
                                  options.mods, options.q_heads_per_chain});
      }
  return cases;
}

uint64_t case_seed(const BenchCase& c) {
  return 1000 + static_cast<uint64_t>(c.shape.seqlen_q + c.shape.head_dim) + (c.causal ? 1 : 0);
}

double forward_flops(const ProblemShape& s, bool causal) {
  const double full = 4.0 * s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim;
  return causal ? full / 2 : full;
}

double forward_flops(const BenchCase& c) {
  const ScoreMods& m = c.mods;
  if (!m.has_window()) return forward_flops(c.shape, c.causal);
  const ProblemShape& s = c.shape;
  const int64_t right = c.causal ? 0 : m.window_right, offset = s.seqlen_k - s.seqlen_q;
  double visible = 0;
  for (int64_t row = 0; row < s.seqlen_q; ++row) {
    const int64_t end = right >= 0 ? std::clamp<int64_t>(row + offset + right + 1, 0, s.seqlen_k) : s.seqlen_k;
    const int64_t begin = m.window_left >= 0 ? std::clamp<int64_t>(row + offset - m.window_left, 0, s.seqlen_k) : 0;
    visible += static_cast<double>(std::max<int64_t>(end - begin, 0));
  }
  return 4.0 * s.batch * s.heads_q * visible * s.head_dim;
}

Options case_options(const BenchCase& c) {
  Options o;
  o.causal = c.causal;
  o.window_left = c.mods.window_left, o.window_right = c.mods.window_right;
  o.softcap = static_cast<float>(c.mods.softcap);
  o.q_heads_per_chain = c.q_heads_per_chain;
  return o;
}

std::string mask_text(const BenchCase& c) {
  return (c.causal ? "causal" : "full") + score_mods_text(c.mods, "", 6);
}

ProblemShape reduced_shape(const ProblemShape& shape) {
  ProblemShape r = shape;
  const int64_t group = shape.heads_q / shape.heads_kv;
  r.batch = std::min<int64_t>(shape.batch, 2);
  r.heads_kv = std::min<int64_t>(shape.heads_kv, 2);
  r.heads_q = r.heads_kv * group;
  const int64_t longest = std::max(shape.seqlen_q, shape.seqlen_k);
  if (longest > kVerifySeqlen) {
    r.seqlen_q = std::max<int64_t>(1, shape.seqlen_q * kVerifySeqlen / longest);
    r.seqlen_k = std::max<int64_t>(1, shape.seqlen_k * kVerifySeqlen / longest);
  }
  return r;
}

bool slice_checked(const BenchOptions& options, const ProblemShape& shape) {
  return std::max(shape.seqlen_q, shape.seqlen_k) <= options.verify_max_seqlen;
}

}  // namespace dash_attn::bench
