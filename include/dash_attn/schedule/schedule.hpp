// The schedule a backward call runs, chosen at run time: one switch over the
// kinds (no virtual functions), the work-item decoder and the per-chain
// cursor the kernel steps through. See interface.hpp for the calling pattern.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/atomic_schedule.hpp"
#include "dash_attn/schedule/descending_schedule.hpp"
#include "dash_attn/schedule/fa3_schedule.hpp"
#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/interface.hpp"
#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/shift_schedule.hpp"
#include "dash_attn/schedule/symmetric_shift_schedule.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::schedule {

// Calls op(S{}) with the schedule type of `kind` (already resolved: kAuto
// behaves as descending, the live fallback, should it ever get here).
template <class Op>
DASH_HOST_DEVICE auto visit_schedule(ScheduleKind kind, Op op) {
  switch (kind) {
    case ScheduleKind::kAtomic: return op(AtomicSchedule{});
    case ScheduleKind::kFA3: return op(Fa3Schedule{});
    case ScheduleKind::kShift: return op(ShiftSchedule{});
    case ScheduleKind::kSymmetricShift: return op(SymmetricShiftSchedule{});
    default: return op(DescendingSchedule{});
  }
}

// Steps of one chain: which Q tile, whether it needs the mask, and the rank
// its dQ add waits for (dQ counter == rank before adding, +1 after). A chain
// that walks several q-heads (`passes` of them) visits each of its Q tiles
// once per q-head; pass() says which q-head. `heads_innermost`: each Q tile
// for every q-head in turn; else the chain's Q tiles for one q-head, then for
// the next (Schedule::heads_innermost says which, and why). One loop over
// every step, not a loop per q-head: the nested loop cost the hdim 128
// backward's MMA warpgroups +204 B of spill stores (ptxas). Schedules with
// a fixed stride (atomic, descending, fa3: kQStride != 0) find the chain's
// first Q tile once and add the stride per step; the wave schedules compute
// each step's tile in their own closed form.
class ChainCursor {
 public:
  DASH_HOST_DEVICE ChainCursor(ScheduleKind kind, const HeadTiles& tiles, int kv, int passes = 1,
                               bool heads_innermost = true)
      : kind_(kind), tiles_(tiles), kv_(kv), length_(tiles.chain_length(kv)), passes_(passes),
        steps_(length_ * passes), heads_innermost_(heads_innermost) {
    visit_schedule(kind, [&](auto s) {
      using S = decltype(s);
      q_stride_ = S::kQStride;
      if constexpr (S::kQStride != 0) first_q_ = S::first_q_tile(tiles, kv);
      return 0;
    });
  }

  DASH_HOST_DEVICE bool valid() const { return step_ < steps_; }
  DASH_HOST_DEVICE void advance() {
    ++step_;
    if (heads_innermost_) {
      if (++pass_ == passes_) pass_ = 0, ++q_step_;
    } else if (++q_step_ == length_) {
      q_step_ = 0, ++pass_;
    }
  }
  DASH_HOST_DEVICE int step() const { return step_; }   // over every q-head
  DASH_HOST_DEVICE int pass() const { return pass_; }   // the q-head of the walk
  DASH_HOST_DEVICE int length() const { return length_; }  // Q tiles per q-head
  DASH_HOST_DEVICE int kv() const { return kv_; }

  DASH_HOST_DEVICE int q_tile() const {
    if (q_stride_ != 0) return first_q_ + q_stride_ * q_step_;
    const HeadTiles& t = tiles_;
    const int kv = kv_, step = q_step_;
    return visit_schedule(kind_, [&](auto s) { return s.q_tile(t, kv, step); });
  }
  DASH_HOST_DEVICE int rank() const {
    const HeadTiles& t = tiles_;
    const int kv = kv_, q = q_tile();
    return visit_schedule(kind_, [&](auto s) { return s.rank(t, kv, q); });
  }
  DASH_HOST_DEVICE bool needs_mask() const { return tiles_.needs_mask(q_tile(), kv_); }

 private:
  ScheduleKind kind_;
  HeadTiles tiles_;
  int kv_;
  int length_;
  int passes_;
  int steps_;
  int step_ = 0;
  bool heads_innermost_;
  int q_step_ = 0;  // step within the Q tiles of one q-head
  int pass_ = 0;
  int q_stride_ = 0;  // the schedule's kQStride (0: q_tile in its closed form)
  int first_q_ = 0;   // with a stride: the Q tile of step 0
};

class Schedule {
 public:
  // `kind` must be resolved (resolve_schedule) so that host and device agree.
  // The claim order is the kernel's (claim_interleave, which depends on the
  // walk) unless a test or the paper's setting asks for another
  // `interleaved_heads` (see total_items); wave schedules always take 1.
  // `chain_heads` q-heads of a GQA group share each chain
  // (default_chain_heads; 1: a chain per q-head); it must divide the group
  // size of every problem the schedule is asked about.
  DASH_HOST_DEVICE Schedule(ScheduleKind kind, const TileProblem& p, int chain_heads = 1)
      : Schedule(kind, claim_interleave(kind, p, chain_heads), chain_heads) {}
  DASH_HOST_DEVICE Schedule(ScheduleKind kind, int interleaved_heads, int chain_heads = 1)
      : kind_(kind),
        interleaved_heads_(is_wave_schedule(kind) || interleaved_heads < 1 ? 1 : interleaved_heads),
        chain_heads_(chain_heads < 1 ? 1 : chain_heads) {}

  DASH_HOST_DEVICE ScheduleKind kind() const { return kind_; }
  DASH_HOST_DEVICE int interleaved_heads() const { return interleaved_heads_; }
  // q-heads a chain walks: heads head_q .. head_q + chain_heads() - 1 of the
  // item, each over the chain's Q tiles in the schedule's order
  // (ChainCursor::pass), dK/dV accumulating in registers across them.
  DASH_HOST_DEVICE int chain_heads() const { return chain_heads_; }

  // Whether a walk visits each Q tile for every q-head in turn (true) or the
  // chain's Q tiles for one q-head after another. Innermost when every chain
  // of a head starts at the head's last Q tile and goes down (atomic and
  // descending without a window's left bound): the chains then stay in step
  // as MHA's do, whereas q-heads outermost let ordered causal chains drift
  // apart (chain kv - 1, longer by d steps, starts q-head p of its walk
  // p * d steps after chain kv, which waits that long for its predecessor's
  // dQ add on every tile). Outermost otherwise: chains that start at
  // different Q tiles (a window's band, fa3's ascending order) then meet a Q
  // tile a few steps apart, where innermost would multiply that distance by
  // the walk and send the tile out of L2 between them. H200, GQA 32/8
  // hdim 128 (docs/perf_log.md 2026-12-02): causal 2 x 4k deterministic 389
  // without a walk, 376 outermost, 486 innermost; window (4096, 0) at 16k
  // 504 outermost, 426 innermost.
  DASH_HOST_DEVICE bool heads_innermost(const HeadTiles& t) const {
    const bool from_last_tile = kind_ == ScheduleKind::kAtomic || kind_ == ScheduleKind::kDescending;
    return from_last_tile && !(t.has_window() && t.window_left >= 0);
  }
  // Whether chains hand dK/dV to an fp32 accumulator of the KV head (GQA
  // chains that walk part of their group) instead of storing them.
  DASH_HOST_DEVICE bool reduces_dkv(const TileProblem& p) const { return chain_heads_ < p.group_size(); }
  DASH_HOST_DEVICE bool ordered() const { return kind_ != ScheduleKind::kAtomic; }

  DASH_HOST_DEVICE int items_per_head(const HeadTiles& t) const {
    return visit_schedule(kind_, [&](auto s) { return s.items_per_head(t); });
  }

  // Work items in claim order. The (sequence, chain head) pairs,
  // sequence-major, are the heads of the order (a chain head: chain_heads()
  // consecutive q-heads; for MHA or chain_heads() == 1 a q-head); they come
  // in groups of `interleaved_heads` consecutive heads (varlen: groups stop at
  // the end of a run of equal-length sequences, work_item_of_run), whose
  // items are dealt round-robin: item 0 of each head of the group, then item
  // 1, ..., each head in the schedule's in-head order. Every wait still
  // targets an earlier claim: a dQ wait an earlier item of the same head, a
  // dK/dV wait a lower q-head of the GQA group at the same item index.
  // Why interleave: the chains of one head wait on each other's dQ adds, so a
  // CTA wave filled with one head's chains staggers them by one hand-off
  // each; dealing G heads at once puts 1/G as many chains of a head in flight
  // together. Wave schedules keep 1: a wave's members are claimed together.
  // GQA, ordered schedules: the span's heads are listed member-major
  // (member_major_head): the q-heads of a KV head are far apart in claim
  // order, each after all lower members of every (sequence, KV head) pair of
  // the span, so a dK/dV add rarely waits for a lower member still in flight
  // (with the q-heads of a group dealt together, the group's chains ended
  // together and their ordered adds ran one after another). Measured on the
  // H200 (GQA 32/8, docs/perf_log.md 2026-12-02): deterministic 1.05-2.87x;
  // atomic, which waits for nothing, lost 2-14% that way (the members of a
  // group no longer share K/V in L2 at once), so it keeps the q-heads in order.
  DASH_HOST_DEVICE int total_items(const TileProblem& p) const {
    if (!p.is_varlen()) return p.batch * chain_spans(p) * items_per_head(p.head_tiles(0));
    int total = 0;
    for (int b = 0; b < p.batch; ++b) total += chain_spans(p) * items_per_head(p.head_tiles(b));
    return total;
  }

  // Chain heads per sequence (heads_q / chain_heads()).
  DASH_HOST_DEVICE int chain_spans(const TileProblem& p) const { return p.heads_q / chain_heads_; }

  // Items of sequence b (all its chain heads), for a varlen batch.
  DASH_HOST_DEVICE int items_of_sequence(const TileProblem& p, int b) const {
    return items_of_sequence(p, p.head_tiles(b));
  }
  // The same for a sequence whose geometry is already read.
  DASH_HOST_DEVICE int items_of_sequence(const TileProblem& p, const HeadTiles& tiles) const {
    return chain_spans(p) * items_per_head(tiles);
  }

  // Decodes the claim index k in [0, total_items). O(1) for equal lengths,
  // O(batch) for varlen, sequence by sequence in index order (the kernel's
  // varlen order is VarlenClaims::kLongestSequenceFirst: work_item_of_run).
  DASH_HOST_DEVICE WorkItem work_item(const TileProblem& p, int k) const {
    if (!p.is_varlen()) return decode(p, p.head_tiles(0), p.batch * chain_spans(p), 0, k);
    int b = 0;
    while (k >= items_of_sequence(p, b)) k -= items_of_sequence(p, b++);
    return work_item_of_sequence(p, b, k);
  }

  // Item k of sequence b's items (0 <= k < items_of_sequence(p, b)).
  DASH_HOST_DEVICE WorkItem work_item_of_sequence(const TileProblem& p, int b, int k) const {
    return decode(p, p.head_tiles(b), chain_spans(p), b * chain_spans(p), k);
  }

  // Item k of a run of `run_length` sequences with the same lengths (their
  // HeadTiles `tiles`), adjacent in the varlen claim order
  // (sequence_claims_before): dealt like an equal-length batch of run_length
  // sequences, so `interleaved_heads` spans the run's sequences instead of
  // stopping at each one's end (GQA 32/8 deals 8 chain heads per sequence;
  // a wide causal tile asks for 32). item.batch is the member's index in the run.
  DASH_HOST_DEVICE WorkItem work_item_of_run(const TileProblem& p, const HeadTiles& tiles, int run_length,
                                             int k) const {
    return decode(p, tiles, run_length * chain_spans(p), 0, k);
  }

  // One pass of chain kv (one q-head), and the whole walk over chain_heads().
  DASH_HOST_DEVICE ChainCursor chain(const HeadTiles& t, int kv) const { return ChainCursor(kind_, t, kv); }
  DASH_HOST_DEVICE ChainCursor chain_walk(const HeadTiles& t, int kv) const {
    return ChainCursor(kind_, t, kv, chain_heads_, heads_innermost(t));
  }

  DASH_HOST_DEVICE int rank(const HeadTiles& t, int kv, int q) const {
    return visit_schedule(kind_, [&](auto s) { return s.rank(t, kv, q); });
  }

  // Rank of the dK/dV add of the chain whose first q-head is head_q within
  // its GQA group (reduces_dkv only): ascending chain head.
  DASH_HOST_DEVICE int dkv_rank(const TileProblem& p, int head_q) const {
    return ordered() ? head_q / chain_heads_ % (p.group_size() / chain_heads_) : kUnordered;
  }

  // CTAs to launch when at most `cap` may be resident: one per item up to the
  // cap; for wave schedules a multiple of the wave size, so that claims in
  // claim order hand out whole waves per round and the members of a wave,
  // which wait on each other, start together instead of one straggling
  // member holding its wave back for a whole chain.
  DASH_HOST_DEVICE int launch_grid(const TileProblem& p, int cap) const {
    const int items = total_items(p);
    const int grid = items < cap ? items : cap;
    const int wave = required_coresidency(p);
    if (wave <= 1 || grid <= wave) return grid > 1 ? grid : 1;
    return grid / wave * wave;
  }

  // Resident CTAs the kernel must guarantee for the schedule to be live:
  // 1 when waits target only earlier-claimed items, the largest wave otherwise.
  DASH_HOST_DEVICE int required_coresidency(const TileProblem& p) const {
    int need = 1;
    const int sequences = p.is_varlen() ? p.batch : (p.batch > 0 ? 1 : 0);
    for (int b = 0; b < sequences; ++b) {
      const HeadTiles t = p.head_tiles(b);
      const int w = visit_schedule(kind_, [&](auto s) { return s.wave_size(t); });
      need = w > need ? w : need;
    }
    return need;
  }

 private:
  // The chain head (index within a span of `heads`, g of them per KV head)
  // at claim position `position`: member position / (heads / g) of
  // (sequence, KV head) pair position % (heads / g); chain head = pair * g +
  // member. The identity for MHA and whole-group chains (g = 1). Every dK/dV
  // wait (a lower member, same pair and item index) still targets an earlier
  // claim.
  DASH_HOST_DEVICE static int member_major_head(int position, int heads, int g) {
    const int pairs = heads / g;
    return position % pairs * g + position / pairs;
  }

  // Item k of a span of `heads` consecutive (sequence, chain head) pairs
  // that share `tiles`, the first of which is the global pair span_first_head.
  DASH_HOST_DEVICE WorkItem decode(const TileProblem& p, const HeadTiles& tiles, int heads, int span_first_head,
                                   int k) const {
    WorkItem item;
    const int per_head = items_per_head(tiles);
    const int group = k / (interleaved_heads_ * per_head);
    const int first_head = group * interleaved_heads_;
    const int rest = heads - first_head;
    const int heads_in_group = rest < interleaved_heads_ ? rest : interleaved_heads_;
    k -= group * interleaved_heads_ * per_head;
    const int position = first_head + k % heads_in_group;
    const int splits = p.group_size() / chain_heads_;  // chains per (KV head, KV tile)
    const int head = span_first_head + (ordered() ? member_major_head(position, heads, splits) : position);
    item.batch = head / chain_spans(p);
    item.head_q = head % chain_spans(p) * chain_heads_;
    item.head_kv = item.head_q / p.group_size();
    item.index_in_head = k / heads_in_group;
    item.tiles = tiles;
    const int index = item.index_in_head;
    item.num_chains = visit_schedule(kind_, [&](auto s) { return s.chains_in_item(tiles, index); });
    // Constant indices keep the item in registers (a run-time index sends it to local memory).
    item.kv[0] = visit_schedule(kind_, [&](auto s) { return s.item_chain(tiles, index, 0); });
    if (item.num_chains > 1) item.kv[1] = visit_schedule(kind_, [&](auto s) { return s.item_chain(tiles, index, 1); });
    return item;
  }

  ScheduleKind kind_;
  int interleaved_heads_;
  int chain_heads_;
};

}  // namespace dash_attn::schedule
