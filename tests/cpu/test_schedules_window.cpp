// Sliding windows in the backward's tile geometry and schedules (issue 18,
// point 1, CPU part): tiles outside the band are skipped, not masked; every
// visible (row, key) pair of the reference mask lies in exactly one visited
// tile; the ranks of a dQ tile's contributors are 0..n-1; the model runs
// without deadlock on any worker count; and without a window everything is
// what it was before windows (a frozen copy of the old formulas).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention_reference.hpp"
#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"
#include "model_liveness.hpp"
#include "schedule_test_problems.hpp"
#include "schedule_trace.hpp"
#include "simulate.hpp"
#include "varlen_trace.hpp"

namespace dash_attn::testing {
namespace {

using schedule::HeadTiles;
using schedule::TileProblem;

constexpr int kBig = 100000;  // larger than every sequence here

// The windows every test runs, FlashAttention's (left, right).
const std::vector<std::pair<int, int>>& windows() {
  static const std::vector<std::pair<int, int>> w = {
      {0, 0}, {1, 0}, {0, 1}, {5, 3}, {3, 5}, {17, 40}, {64, 0}, {-1, 2}, {7, -1}, {kBig, kBig}, {kBig, 0}, {0, kBig},
      {-1, kBig}, {kBig, -1}, {-1, -1}, {-1, 0}};
  return w;
}

// The window a request means: causal with a window is (left, 0).
reference::AttentionOptions options_of(const TileProblem& p) {
  reference::AttentionOptions o;
  o.window_left = p.window_left;
  o.window_right = p.causal ? 0 : p.window_right;
  return o;
}

// Random problems with windows: lengths unequal both ways, tiles unequal both
// ways, varlen with empty sequences, small enough for an element-wise check.
std::vector<OwnedProblem> window_problems(unsigned seed, int count, int max_seqlen = 260) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<OwnedProblem> problems;
  for (OwnedProblem& owned : random_problems(seed, count, max_seqlen)) {
    TileProblem p = owned.get();
    const auto& w = windows()[pick(0, static_cast<int>(windows().size()) - 1)];
    if (pick(0, 3) == 0) {  // a random window instead
      p.window_left = pick(-1, 80);
      p.window_right = pick(-1, 80);
    } else {
      p.window_left = w.first;
      p.window_right = w.second;
    }
    std::vector<int> sq, sk;
    if (p.is_varlen())
      for (int b = 0; b < p.batch; ++b) sq.push_back(p.seqlen_q_of(b)), sk.push_back(p.seqlen_k_of(b));
    p.cu_seqlens_q = p.cu_seqlens_k = nullptr;
    problems.emplace_back(p, sq, sk);
  }
  return problems;
}

// Short problems plus some long enough that a band lies inside the head.
std::vector<OwnedProblem> mixed_window_problems(unsigned seed, int count) {
  std::vector<OwnedProblem> problems = window_problems(seed, count);
  for (OwnedProblem& p : window_problems(seed + 1000, count / 8, 1500)) problems.push_back(p);
  return problems;
}

std::string describe(const OwnedProblem& owned) {
  const TileProblem p = owned.get();
  return owned.describe() + " window (" + std::to_string(p.window_left) + ", " + std::to_string(p.window_right) + ")";
}

// Per tile of one sequence, by brute force over the reference mask: a
// visible element (work), a hidden element of a real row (needs the mask).
struct BruteTiles {
  std::vector<std::vector<bool>> work, masked;  // [q][kv]
};

BruteTiles brute_tiles(const HeadTiles& t, const reference::AttentionOptions& o) {
  BruteTiles b;
  b.work.assign(t.q_tiles(), std::vector<bool>(t.kv_tiles(), false));
  b.masked = b.work;
  for (int r = 0; r < t.seqlen_q; ++r)
    for (int kv = 0; kv < t.kv_tiles(); ++kv)
      for (int c = kv * t.block_n; c < (kv + 1) * t.block_n; ++c) {
        const bool visible = c < t.seqlen_k && reference::key_visible(r, c, t.seqlen_q, t.seqlen_k, o);
        (visible ? b.work : b.masked)[r / t.block_m][kv] = true;
      }
  return b;
}

constexpr ScheduleKind kWindowKinds[] = {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                         ScheduleKind::kAuto};

TEST(ScheduleWindow, ResolveAndSupport) {
  TileProblem p{1, 4, 4, 64, 64, true, 1024, 1024};  // hdim 256's tiles: fa3 on a short causal head
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);
  p.window_left = 100;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);
  p.window_left = -1, p.window_right = 7;  // causal ignores the right side: no window
  EXPECT_FALSE(p.has_window());
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);
  p.causal = false;
  EXPECT_TRUE(p.has_window());
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);
  for (ScheduleKind k : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kAuto})
    EXPECT_TRUE(schedule::supports_window(k)) << to_string(k);
  EXPECT_FALSE(schedule::supports_window(ScheduleKind::kShift));
  EXPECT_FALSE(schedule::supports_window(ScheduleKind::kSymmetricShift));
}

// Without a window, HeadTiles' mask is exactly causal_window(causal); causal
// with a window is (left, 0) through sliding_window.
TEST(ScheduleWindow, GeometryWindow) {
  for (bool causal : {false, true})
    for (int sq : {0, 1, 5, 300})
      for (int sk : {0, 1, 7, 300}) {
        const HeadTiles t{sq, sk, 64, 32, causal};
        EXPECT_EQ(t.window().left, mask::causal_window(causal).left);
        EXPECT_EQ(t.window().right, mask::causal_window(causal).right);
        const HeadTiles w{sq, sk, 64, 32, causal, 3, 9};
        const mask::MaskWindow expected = mask::sliding_window(3, causal ? 0 : 9, sq, sk);
        EXPECT_EQ(w.window().left, expected.left);
        EXPECT_EQ(w.window().right, expected.right);
      }
}

// (a) Every visible element in exactly one visited tile, no fully masked
// tile visited, needs_mask exactly when an element of a real row is hidden;
// the band queries agree with the brute force.
TEST(ScheduleWindow, EveryVisiblePairOnceMaskedTilesNever) {
  for (const OwnedProblem& owned : mixed_window_problems(31, 400)) {
    const TileProblem p = owned.get();
    const reference::AttentionOptions o = options_of(p);
    std::vector<BruteTiles> brute;
    for (int b = 0; b < p.batch; ++b) {
      const HeadTiles t = p.head_tiles(b);
      brute.push_back(brute_tiles(t, o));
      for (int q = 0; q < t.q_tiles(); ++q)
        for (int kv = 0; kv < t.kv_tiles(); ++kv) {
          const bool in_row_band = t.kv_begin(q) <= kv && kv < t.kv_end(q);
          const bool in_chain_band = t.q_begin(kv) <= q && q < t.q_end(kv);
          ASSERT_EQ(in_row_band, brute[b].work[q][kv]) << describe(owned) << " q " << q << " kv " << kv;
          ASSERT_EQ(in_chain_band, brute[b].work[q][kv]) << describe(owned) << " q " << q << " kv " << kv;
        }
    }
    for (ScheduleKind kind : kWindowKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      std::map<std::tuple<int, int, int, int>, int> visits;
      for (const model::TraceChain& chain : trace.chains)
        for (const model::TraceStep& step : chain.steps) {
          ++visits[{chain.batch, chain.head_q, chain.kv, step.q}];
          const BruteTiles& bt = brute[chain.batch];
          ASSERT_TRUE(bt.work[step.q][chain.kv]) << describe(owned) << " " << to_string(kind) << " masked tile";
          ASSERT_EQ(step.masked, static_cast<bool>(bt.masked[step.q][chain.kv]))
              << describe(owned) << " " << to_string(kind) << " q " << step.q << " kv " << chain.kv;
        }
      for (int b = 0; b < p.batch; ++b) {
        const HeadTiles t = p.head_tiles(b);
        for (int h = 0; h < p.heads_q; ++h)
          for (int q = 0; q < t.q_tiles(); ++q)
            for (int kv = 0; kv < t.kv_tiles(); ++kv) {
              const auto it = visits.find({b, h, kv, q});
              ASSERT_EQ(it == visits.end() ? 0 : it->second, brute[b].work[q][kv] ? 1 : 0)
                  << describe(owned) << " " << to_string(kind) << " b " << b << " h " << h << " q " << q << " kv "
                  << kv;
            }
      }
    }
  }
}

// (b) Ranks of each dQ tile's contributors are 0..n-1, n = contributors; for
// ascending-KV orders the rank is the position among [kv_begin, kv_end).
void expect_ranks(const TileProblem& p, const model::ScheduleTrace& trace, const std::string& what) {
  std::vector<std::vector<int>> ranks(trace.dq_contributors.size());
  std::vector<std::vector<std::pair<int, int>>> kv_rank(trace.dq_contributors.size());
  for (const model::TraceChain& chain : trace.chains)
    for (const model::TraceStep& step : chain.steps) {
      ranks[step.dq_tile].push_back(step.rank);
      kv_rank[step.dq_tile].push_back({chain.kv, step.rank});
    }
  for (std::size_t tile = 0; tile < ranks.size(); ++tile) {
    std::vector<int> r = ranks[tile];
    std::sort(r.begin(), r.end());
    ASSERT_EQ(static_cast<int>(r.size()), trace.dq_contributors[tile]) << what << " tile " << tile;
    for (int i = 0; i < static_cast<int>(r.size()); ++i) ASSERT_EQ(r[i], i) << what << " tile " << tile;
    if (trace.kind == ScheduleKind::kDescending || (trace.kind == ScheduleKind::kFA3 && !p.causal)) {
      std::vector<std::pair<int, int>> kr = kv_rank[tile];
      std::sort(kr.begin(), kr.end());
      for (int i = 0; i < static_cast<int>(kr.size()); ++i) ASSERT_EQ(kr[i].second, i) << what << " tile " << tile;
    }
  }
}

TEST(ScheduleWindow, RanksArePositionsAmongTheBand) {
  for (const OwnedProblem& owned : mixed_window_problems(32, 400))
    for (ScheduleKind kind : {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kAuto}) {
      const TileProblem p = owned.get();
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      expect_ranks(p, trace, describe(owned) + " " + std::string(to_string(kind)));
    }
}

model::VarlenBatch varlen_batch_of(const TileProblem& p) {
  std::vector<std::pair<int, int>> lengths;
  for (int b = 0; b < p.batch; ++b) lengths.push_back({p.seqlen_q_of(b), p.seqlen_k_of(b)});
  return model::VarlenBatch(lengths, p.heads_q, p.heads_kv, p.block_m, p.block_n, p.causal, 0, 0, p.window_left,
                            p.window_right);
}

constexpr schedule::VarlenClaims kAllClaims[] = {schedule::VarlenClaims::kLongestFirst,
                                                 schedule::VarlenClaims::kLongestSequenceFirst,
                                                 schedule::VarlenClaims::kInOrder};

TEST(ScheduleWindow, VarlenTracesCoverTheBandWithPositionRanks) {
  for (const OwnedProblem& owned : mixed_window_problems(33, 300)) {
    const TileProblem p = owned.get();
    if (!p.is_varlen()) continue;
    const model::VarlenBatch batch = varlen_batch_of(p);
    const model::ScheduleTrace reference_trace = model::build_trace(p, ScheduleKind::kDescending);
    for (schedule::VarlenClaims claims : kAllClaims) {
      const model::ScheduleTrace trace = model::build_varlen_trace(batch.get(), claims);
      expect_ranks(p, trace, describe(owned) + " varlen");
      ASSERT_EQ(trace.dq_contributors, reference_trace.dq_contributors) << describe(owned);
      std::map<std::tuple<int, int, int>, std::vector<std::tuple<int, int, bool>>> steps, expected;
      for (const model::TraceChain& c : trace.chains)
        for (const model::TraceStep& s : c.steps) steps[{c.batch, c.head_q, c.kv}].push_back({s.q, s.rank, s.masked});
      for (const model::TraceChain& c : reference_trace.chains)
        for (const model::TraceStep& s : c.steps)
          expected[{c.batch, c.head_q, c.kv}].push_back({s.q, s.rank, s.masked});
      ASSERT_EQ(steps, expected) << describe(owned);
    }
  }
}

// (c) No deadlock for 1..24 workers, dynamic and static claims: expect_live (model_liveness.hpp).

TEST(ScheduleWindow, LiveWithAnyNumberOfWorkers) {
  std::mt19937 rng(7);
  for (const OwnedProblem& owned : mixed_window_problems(34, 60)) {
    const TileProblem p = owned.get();
    for (ScheduleKind kind : kWindowKinds)
      expect_live(model::build_trace(p, kind), rng, describe(owned) + " " + std::string(to_string(kind)));
    if (p.is_varlen()) {
      const model::VarlenBatch batch = varlen_batch_of(p);
      for (schedule::VarlenClaims claims : kAllClaims)
        expect_live(model::build_varlen_trace(batch.get(), claims), rng, describe(owned) + " varlen");
    }
  }
}

// (d) No window: the pre-window formulas, frozen here, for every existing
// test problem; and (-1, -1), causal with (-1, R) give the same traces.
struct OldSteps {
  int q;
  int rank;
  bool masked;
};

std::vector<OldSteps> old_chain(ScheduleKind kind, const TileProblem& p, int b, int kv) {
  const HeadTiles t{p.seqlen_q_of(b), p.seqlen_k_of(b), p.block_m, p.block_n, p.causal};
  const mask::MaskGeometry g{t.seqlen_q, t.seqlen_k, t.block_m, t.block_n, t.q_tiles(), t.kv_tiles(),
                             mask::causal_window(p.causal)};
  std::vector<OldSteps> steps;
  const int length = g.q_end(kv) - g.q_begin(kv);
  for (int step = 0; step < length; ++step) {
    int q = 0, rank = 0;
    switch (kind) {
      case ScheduleKind::kAtomic: q = t.q_tiles() - 1 - step, rank = schedule::kUnordered; break;
      case ScheduleKind::kFA3:
        q = g.q_begin(kv) + step, rank = p.causal ? g.kv_end(q) - 1 - kv : kv;
        break;
      default: q = t.q_tiles() - 1 - step, rank = kv; break;
    }
    steps.push_back(OldSteps{q, rank, g.tile_needs_mask(q, kv)});
  }
  return steps;
}

void expect_same_trace(const model::ScheduleTrace& a, const model::ScheduleTrace& b, const std::string& what) {
  ASSERT_EQ(a.kind, b.kind) << what;
  ASSERT_EQ(a.coresidency, b.coresidency) << what;
  ASSERT_EQ(a.dq_contributors, b.dq_contributors) << what;
  ASSERT_EQ(a.num_dkv_tiles, b.num_dkv_tiles) << what;
  ASSERT_EQ(a.items.size(), b.items.size()) << what;
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    ASSERT_EQ(a.items[i].first_chain, b.items[i].first_chain) << what;
    ASSERT_EQ(a.items[i].num_chains, b.items[i].num_chains) << what;
  }
  ASSERT_EQ(a.chains.size(), b.chains.size()) << what;
  for (std::size_t c = 0; c < a.chains.size(); ++c) {
    const model::TraceChain &x = a.chains[c], &y = b.chains[c];
    ASSERT_EQ(std::tie(x.batch, x.head_q, x.head_kv, x.kv, x.dkv_tile, x.dkv_rank),
              std::tie(y.batch, y.head_q, y.head_kv, y.kv, y.dkv_tile, y.dkv_rank))
        << what << " chain " << c;
    ASSERT_EQ(x.steps.size(), y.steps.size()) << what << " chain " << c;
    for (std::size_t s = 0; s < x.steps.size(); ++s)
      ASSERT_EQ(std::tie(x.steps[s].q, x.steps[s].dq_tile, x.steps[s].rank, x.steps[s].masked),
                std::tie(y.steps[s].q, y.steps[s].dq_tile, y.steps[s].rank, y.steps[s].masked))
          << what << " chain " << c << " step " << s;
  }
}

TEST(ScheduleWindow, NoWindowIsThePreWindowCode) {
  std::vector<OwnedProblem> problems = mixed_problems(1);
  for (OwnedProblem& owned : random_problems(77, 200)) problems.push_back(owned);
  for (const OwnedProblem& owned : problems) {
    const TileProblem p = owned.get();
    ASSERT_FALSE(p.has_window());
    for (ScheduleKind kind : kAllKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      const std::string what = owned.describe() + " " + std::string(to_string(kind));
      // The old contributor counts (kv_end) and chains.
      std::size_t tile = 0;
      for (int b = 0; b < p.batch; ++b) {
        const HeadTiles t = p.head_tiles(b);
        const mask::MaskGeometry g{t.seqlen_q, t.seqlen_k, t.block_m, t.block_n, t.q_tiles(), t.kv_tiles(),
                                   mask::causal_window(p.causal)};
        for (int h = 0; h < p.heads_q; ++h)
          for (int q = 0; q < t.q_tiles(); ++q) ASSERT_EQ(trace.dq_contributors[tile++], g.kv_end(q)) << what;
        for (int kv = 0; kv < t.kv_tiles(); ++kv) {
          ASSERT_EQ(t.kv_begin(0), 0) << what;
          ASSERT_EQ(t.chain_length(kv), g.q_end(kv) - g.q_begin(kv)) << what;
          ASSERT_EQ(t.q_end(kv), t.q_tiles()) << what;
        }
      }
      if (trace.kind == ScheduleKind::kAtomic || trace.kind == ScheduleKind::kFA3 ||
          trace.kind == ScheduleKind::kDescending)
        for (const model::TraceChain& chain : trace.chains) {
          const std::vector<OldSteps> old = old_chain(trace.kind, p, chain.batch, chain.kv);
          ASSERT_EQ(chain.steps.size(), old.size()) << what;
          for (std::size_t s = 0; s < old.size(); ++s) {
            ASSERT_EQ(chain.steps[s].q, old[s].q) << what;
            ASSERT_EQ(chain.steps[s].rank, old[s].rank) << what;
            ASSERT_EQ(chain.steps[s].masked, old[s].masked) << what;
          }
        }
      // Spelled-out "no window" requests give the same trace.
      TileProblem unbounded = p;
      unbounded.window_left = unbounded.window_right = -1;
      expect_same_trace(trace, model::build_trace(unbounded, kind), what + " (-1, -1)");
      if (p.causal) {
        TileProblem right_only = p;
        right_only.window_right = 5;  // ignored under causal
        expect_same_trace(trace, model::build_trace(right_only, kind), what + " causal (-1, 5)");
      }
    }
    if (p.is_varlen()) {
      const model::VarlenBatch plain = varlen_batch_of(p);
      std::vector<std::pair<int, int>> lengths;
      for (int b = 0; b < p.batch; ++b) lengths.push_back({p.seqlen_q_of(b), p.seqlen_k_of(b)});
      const model::VarlenBatch old_way(lengths, p.heads_q, p.heads_kv, p.block_m, p.block_n, p.causal);
      for (schedule::VarlenClaims claims : kAllClaims) {
        const model::ScheduleTrace trace = model::build_varlen_trace(old_way.get(), claims);
        expect_same_trace(trace, model::build_varlen_trace(plain.get(), claims), owned.describe() + " varlen");
        // claim_length is chain_length without a window: the old claim key.
        const schedule::VarlenProblem vp = old_way.get();
        for (const model::TraceChain& c : trace.chains) {
          const schedule::VarlenChain chain{c.batch, c.head_q, c.kv};
          ASSERT_EQ(vp.claim_length(chain), vp.chain_length(chain)) << owned.describe();
          ASSERT_EQ(static_cast<int>(c.steps.size()), vp.chain_length(chain));
        }
        const std::vector<schedule::VarlenChain> order = schedule::varlen_claim_order(vp, claims);
        for (std::size_t i = 0; i < order.size(); ++i) {
          ASSERT_EQ(trace.chains[i].kv, order[i].kv);
          const model::TraceChain& c = trace.chains[i];
          const std::vector<OldSteps> old = old_chain(ScheduleKind::kDescending, p, c.batch, c.kv);
          ASSERT_EQ(c.steps.size(), old.size());
          for (std::size_t s = 0; s < old.size(); ++s)
            ASSERT_EQ(std::tie(c.steps[s].q, c.steps[s].rank, c.steps[s].masked),
                      std::tie(old[s].q, old[s].rank, old[s].masked));
        }
      }
    }
  }
}

// A window wider than the sequences visits what no mask (or causal) does.
TEST(ScheduleWindow, WindowWiderThanTheSequenceVisitsTheUnwindowedTiles) {
  for (const OwnedProblem& owned : random_problems(78, 150)) {
    const TileProblem p = owned.get();
    TileProblem wide = p;
    wide.window_left = kBig;
    wide.window_right = kBig;
    for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending}) {
      const model::ScheduleTrace a = model::build_trace(p, kind), b = model::build_trace(wide, kind);
      expect_same_trace(a, b, owned.describe() + " " + std::string(to_string(kind)) + " wide window");
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
