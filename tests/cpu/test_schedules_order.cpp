// Reduction orders: per dQ tile (and per GQA dK/dV tile) the ranks are a
// permutation of 0..k-1, consistent with the order in which the chains reach
// the tile in the schedule's intended timeline, and the closed forms of the
// wave schedules equal a brute-force sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "dash_attn/schedule/schedule.hpp"
#include "schedule_test_problems.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::testing {
namespace {

TEST(ScheduleOrder, RanksArePermutations) {
  for (const OwnedProblem& owned : mixed_problems(3)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kOrderedKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      std::vector<std::vector<int>> dq(trace.dq_contributors.size()), dkv(trace.num_dkv_tiles);
      for (const model::TraceChain& chain : trace.chains) {
        dkv[chain.dkv_tile].push_back(chain.dkv_rank);
        for (const model::TraceStep& step : chain.steps) dq[step.dq_tile].push_back(step.rank);
      }
      for (std::size_t t = 0; t < dq.size(); ++t) {
        std::sort(dq[t].begin(), dq[t].end());
        ASSERT_EQ(static_cast<int>(dq[t].size()), trace.dq_contributors[t]) << owned.describe();
        for (std::size_t i = 0; i < dq[t].size(); ++i)
          ASSERT_EQ(dq[t][i], static_cast<int>(i)) << owned.describe() << " " << to_string(trace.kind) << " tile " << t;
      }
      for (auto& ranks : dkv) {
        std::sort(ranks.begin(), ranks.end());
        ASSERT_EQ(static_cast<int>(ranks.size()), p.group_size());
        for (std::size_t i = 0; i < ranks.size(); ++i) ASSERT_EQ(ranks[i], static_cast<int>(i));
      }
    }
  }
}

// Intended timeline, one unit per step: single-chain schedules start every
// chain at once; wave schedules start a head's wave when its previous wave
// ends (its members' items all start together). Within an item, the second
// chain starts after the first.
struct Arrival {
  int time, rank, item;
};

std::vector<int> wave_starts(const schedule::TileProblem& p, const model::ScheduleTrace& trace) {
  std::vector<int> start(trace.items.size(), 0);
  const schedule::Schedule s(trace.kind, p);
  std::size_t k = 0;
  for (int b = 0; b < p.batch; ++b) {
    const schedule::HeadTiles t = p.head_tiles(b);
    const schedule::WaveSplit waves = trace.kind == ScheduleKind::kShift ? schedule::ShiftSchedule::waves(t)
                                      : trace.kind == ScheduleKind::kSymmetricShift
                                          ? schedule::SymmetricShiftSchedule::waves(t)
                                          : schedule::WaveSplit::make(s.items_per_head(t), 1 << 30);
    for (int h = 0; h < p.heads_q; ++h) {
      int clock = 0, wave_end = 0, current = 0;
      for (int i = 0; i < s.items_per_head(t); ++i, ++k) {
        if (waves.wave_of(i) != current) current = waves.wave_of(i), clock = wave_end;
        start[k] = clock;
        int length = 0;
        const model::TraceItem& item = trace.items[k];
        for (int c = item.first_chain; c < item.first_chain + item.num_chains; ++c)
          length += static_cast<int>(trace.chains[c].steps.size());
        wave_end = std::max(wave_end, clock + length);
      }
    }
  }
  return start;
}

TEST(ScheduleOrder, RanksFollowArrivalInTheIntendedTimeline) {
  for (const OwnedProblem& owned : mixed_problems(4)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kOrderedKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      const std::vector<int> start = wave_starts(p, trace);
      std::vector<std::vector<Arrival>> tiles(trace.dq_contributors.size());
      for (std::size_t k = 0; k < trace.items.size(); ++k) {
        int time = start[k];
        const model::TraceItem& item = trace.items[k];
        for (int c = item.first_chain; c < item.first_chain + item.num_chains; ++c)
          for (const model::TraceStep& step : trace.chains[c].steps) tiles[step.dq_tile].push_back({time++, step.rank, int(k)});
      }
      for (const auto& arrivals : tiles)
        for (const Arrival& x : arrivals)
          for (const Arrival& y : arrivals)
            ASSERT_FALSE(x.time < y.time && x.rank > y.rank)
                << owned.describe() << " " << to_string(trace.kind) << ": rank " << x.rank << " arrives at " << x.time
                << " before rank " << y.rank << " at " << y.time;
    }
  }
}

// Inside one wave of a wave schedule no two chains reach a tile at the same
// step unless their first Q tiles coincide: the adds never collide.
TEST(ScheduleOrder, WaveSchedulesAreConflictFreeForSquareTiles) {
  for (int n_k = 1; n_k <= 40; ++n_k)
    for (bool causal : {false, true}) {
      const schedule::TileProblem p{1, 1, 1, 64, 64, causal, 64 * n_k, 64 * n_k};
      const model::ScheduleTrace trace = model::build_trace(p, ScheduleKind::kShift);
      const std::vector<int> start = wave_starts(p, trace);
      std::vector<std::vector<int>> times(trace.dq_contributors.size());
      for (std::size_t k = 0; k < trace.items.size(); ++k) {
        int time = start[k];
        const model::TraceItem& item = trace.items[k];
        for (int c = item.first_chain; c < item.first_chain + item.num_chains; ++c)
          for (const model::TraceStep& step : trace.chains[c].steps) times[step.dq_tile].push_back(time++);
      }
      for (auto& t : times) {
        std::sort(t.begin(), t.end());
        EXPECT_TRUE(std::adjacent_find(t.begin(), t.end()) == t.end()) << n_k << (causal ? " causal" : " full");
      }
    }
}

// The closed-form ranks of shift and symmetric_shift equal a sort of the
// contributors by (wave, step in the item, pair index).
TEST(ScheduleOrder, WaveRanksMatchBruteForceSort) {
  for (const OwnedProblem& owned : mixed_problems(5)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : {ScheduleKind::kShift, ScheduleKind::kSymmetricShift}) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      const schedule::Schedule s(trace.kind, p);
      std::vector<std::vector<std::tuple<int, int, int, int>>> keyed(trace.dq_contributors.size());  // wave, step, pair, rank
      std::size_t k = 0;
      for (int b = 0; b < p.batch; ++b) {
        const schedule::HeadTiles t = p.head_tiles(b);
        const schedule::WaveSplit waves = trace.kind == ScheduleKind::kShift ? schedule::ShiftSchedule::waves(t)
                                                                             : schedule::SymmetricShiftSchedule::waves(t);
        for (int h = 0; h < p.heads_q; ++h)
          for (int i = 0; i < s.items_per_head(t); ++i, ++k) {
            int time = 0;
            const model::TraceItem& item = trace.items[k];
            for (int c = item.first_chain; c < item.first_chain + item.num_chains; ++c)
              for (const model::TraceStep& step : trace.chains[c].steps)
                keyed[step.dq_tile].emplace_back(waves.wave_of(i), time++, i, step.rank);
          }
      }
      for (auto& contributions : keyed) {
        std::sort(contributions.begin(), contributions.end());
        for (std::size_t r = 0; r < contributions.size(); ++r)
          ASSERT_EQ(std::get<3>(contributions[r]), static_cast<int>(r)) << owned.describe() << " " << to_string(trace.kind);
      }
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
