#include "simulate.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <sstream>

namespace dash_attn::model {
namespace {

enum class Phase { kClaim, kStartChain, kCompute, kReduce, kEpilogue, kDkv, kDone };

struct Worker {
  Phase phase = Phase::kClaim;
  int item = -1, slot = 0, chain = -1, step = 0;
  int next_static = 0;  // kStatic: index of the next item among this worker's
  double compute_free = 0;
  std::array<double, CostModel::kMaxDqWriters> writer_free{};  // per dQ stage: its last add done
  int tiles = 0;                                     // dQ tiles handed so far (stage = tiles mod writers)
  double compute_end = 0;  // end of the current step's compute
  double t = 0;            // when its next action can happen
  bool blocked = false;
};

// One ordered reduction target (a dQ tile or a GQA dK/dV tile).
struct Counter {
  int value = 0;
  double released = 0;
  int last_worker = -1;
};

class Simulator {
 public:
  Simulator(const ScheduleTrace& trace, int workers, Assignment assignment, const CostModel& cost)
      : trace_(trace), assignment_(assignment), cost_(cost), workers_(workers),
        dq_(trace.dq_contributors.size()), dkv_(trace.num_dkv_tiles) {
    result_.timelines.resize(workers);
    result_.busy.assign(workers, 0.0);
    result_.worker_items.resize(workers);
    result_.item_worker.assign(trace.items.size(), -1);
  }

  SimResult run() {
    for (;;) {
      int next = -1;
      bool unfinished = false;
      for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
        if (workers_[w].phase == Phase::kDone) continue;
        unfinished = true;
        if (!workers_[w].blocked && (next < 0 || workers_[w].t < workers_[next].t)) next = w;
      }
      if (!unfinished) break;
      if (next < 0) {
        report_deadlock();
        break;
      }
      act(next);
    }
    for (const auto& timeline : result_.timelines)
      for (const Segment& s : timeline) result_.makespan = std::max(result_.makespan, s.end);
    return std::move(result_);
  }

 private:
  bool serial() const { return !cost_.overlap_reduce; }
  int writers() const { return cost_.writers(); }
  double writers_done(const Worker& k) const {
    return *std::max_element(k.writer_free.begin(), k.writer_free.begin() + writers());
  }
  // Where the worker's compute may go on after a chain.
  double after_chain(const Worker& k) const {
    return cost_.drains_between_chains() ? std::max(k.compute_free, writers_done(k)) : k.compute_free;
  }

  void add(int w, double start, double end, SegmentKind kind, int step, bool busy, bool on_writer = false) {
    if (end <= start) return;
    result_.timelines[w].push_back(Segment{start, end, kind, workers_[w].chain, step, on_writer});
    if (busy) result_.busy[w] += end - start;
  }

  // Earliest time a counter at `rank` lets worker w add: after the previous
  // contributor's release, plus the handoff when it ran elsewhere.
  double ready_after(const Counter& c, int w) const {
    if (c.last_worker < 0) return 0;
    return c.released + (c.last_worker == w ? 0 : cost_.handoff);
  }

  void release(Counter& c, int w, double when) {
    ++c.value;
    c.released = when;
    c.last_worker = w;
    for (Worker& other : workers_) other.blocked = false;  // they re-check their counter
  }

  void act(int w) {
    Worker& k = workers_[w];
    switch (k.phase) {
      case Phase::kClaim: return claim(w);
      case Phase::kStartChain: return start_chain(w);
      case Phase::kCompute: return compute(w);
      case Phase::kReduce: return reduce(w);
      case Phase::kEpilogue: return epilogue(w);
      case Phase::kDkv: return dkv(w);
      case Phase::kDone: return;
    }
  }

  void claim(int w) {
    Worker& k = workers_[w];
    int item = -1;
    if (assignment_ == Assignment::kDynamic) {
      if (next_item_ < static_cast<int>(trace_.items.size())) item = next_item_++;
    } else {
      const long long index = static_cast<long long>(k.next_static++) * workers_.size() + w;
      if (index < static_cast<long long>(trace_.items.size())) item = static_cast<int>(index);
    }
    if (item < 0) {
      k.phase = Phase::kDone;
      return;
    }
    k.item = item;
    k.slot = 0;
    result_.item_worker[item] = w;
    result_.worker_items[w].push_back(item);
    k.phase = Phase::kStartChain;
  }

  void start_chain(int w) {
    Worker& k = workers_[w];
    k.chain = trace_.items[k.item].first_chain + k.slot;
    k.step = 0;
    const double start = after_chain(k);
    add(w, start, start + cost_.prologue, SegmentKind::kPrologue, 0, true);
    k.compute_free = start + cost_.prologue;
    k.phase = trace_.chains[k.chain].steps.empty() ? Phase::kEpilogue : Phase::kCompute;
    k.t = k.compute_free;
  }

  void compute(int w) {
    Worker& k = workers_[w];
    const TraceStep& step = trace_.chains[k.chain].steps[k.step];
    const double start = serial() ? std::max(k.compute_free, writers_done(k)) : k.compute_free;
    const double done = start + (step.masked ? cost_.compute_masked : cost_.compute);
    const double handed = std::max(done, k.writer_free[k.tiles % writers()]);  // overlapped: its stage free again
    add(w, start, done, SegmentKind::kCompute, k.step, true);
    add(w, done, handed, SegmentKind::kComputeStall, k.step, false);
    k.compute_free = k.compute_end = handed;
    k.phase = Phase::kReduce;
    k.t = handed;
  }

  void reduce(int w) {
    Worker& k = workers_[w];
    const TraceStep& step = trace_.chains[k.chain].steps[k.step];
    Counter& counter = dq_[step.dq_tile];
    double ready = k.compute_end;
    if (trace_.ordered) {
      if (counter.value != step.rank) {
        k.blocked = true;
        return;
      }
      ready = std::max(ready, ready_after(counter, w));
    }
    add(w, k.compute_end, ready, SegmentKind::kReduceWait, k.step, false, !serial());
    add(w, ready, ready + cost_.reduce, SegmentKind::kReduce, k.step, serial(), !serial());
    double& writer_free = k.writer_free[k.tiles++ % writers()];
    writer_free = ready + cost_.reduce;
    if (trace_.ordered) release(counter, w, writer_free);
    ++k.step;
    k.phase = k.step < static_cast<int>(trace_.chains[k.chain].steps.size()) ? Phase::kCompute : Phase::kEpilogue;
    k.t = serial() ? writer_free : k.compute_free;
  }

  void epilogue(int w) {
    Worker& k = workers_[w];
    const double start = serial() ? std::max(k.compute_free, writers_done(k)) : k.compute_free;
    add(w, start, start + cost_.epilogue, SegmentKind::kEpilogue, 0, true);
    k.compute_free = start + cost_.epilogue;
    k.t = k.compute_free;
    if (trace_.reduces_dkv) {
      k.phase = Phase::kDkv;
    } else {
      finish_chain(w);
    }
  }

  void dkv(int w) {
    Worker& k = workers_[w];
    const TraceChain& chain = trace_.chains[k.chain];
    Counter& counter = dkv_[chain.dkv_tile];
    double ready = k.compute_free;
    if (trace_.ordered) {
      if (counter.value != chain.dkv_rank) {
        k.blocked = true;
        return;
      }
      ready = std::max(ready, ready_after(counter, w));
    }
    add(w, k.compute_free, ready, SegmentKind::kDkvWait, 0, false);
    add(w, ready, ready + cost_.reduce_dkv, SegmentKind::kDkvReduce, 0, true);
    k.compute_free = ready + cost_.reduce_dkv;
    if (trace_.ordered) release(counter, w, k.compute_free);
    k.t = k.compute_free;
    finish_chain(w);
  }

  void finish_chain(int w) {
    Worker& k = workers_[w];
    ++k.slot;
    k.phase = k.slot < trace_.items[k.item].num_chains ? Phase::kStartChain : Phase::kClaim;
    k.t = after_chain(k);
  }

  void report_deadlock() {
    result_.deadlock = true;
    std::ostringstream out;
    int shown = 0;
    for (int w = 0; w < static_cast<int>(workers_.size()) && shown < 3; ++w) {
      const Worker& k = workers_[w];
      if (!k.blocked) continue;
      const TraceChain& chain = trace_.chains[k.chain];
      if (shown++ > 0) out << "; ";
      out << "worker " << w << " (chain b" << chain.batch << " h" << chain.head_q << " kv" << chain.kv << ") waits ";
      if (k.phase == Phase::kReduce) {
        const TraceStep& step = chain.steps[k.step];
        out << "for rank " << step.rank << " on dQ tile q" << step.q << " (counter at " << dq_[step.dq_tile].value << ")";
      } else {
        out << "for dK/dV rank " << chain.dkv_rank << " (counter at " << dkv_[chain.dkv_tile].value << ")";
      }
    }
    const int unclaimed = static_cast<int>(std::count(result_.item_worker.begin(), result_.item_worker.end(), -1));
    out << "; " << unclaimed << " items never claimed: the contributions they owe cannot happen with "
        << workers_.size() << " resident workers (the schedule needs " << trace_.coresidency << ")";
    result_.deadlock_reason = out.str();
  }

  const ScheduleTrace& trace_;
  Assignment assignment_;
  CostModel cost_;
  std::vector<Worker> workers_;
  std::vector<Counter> dq_, dkv_;
  int next_item_ = 0;
  SimResult result_;
};

}  // namespace

SimResult simulate(const ScheduleTrace& trace, int workers, Assignment assignment, const CostModel& cost) {
  return Simulator(trace, workers, assignment, cost).run();
}

}  // namespace dash_attn::model
