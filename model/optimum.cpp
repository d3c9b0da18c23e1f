#include "optimum.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace dash_attn::model {
namespace {

constexpr double kEps = 1e-9;

struct ChainInfo {
  std::vector<int> tiles;        // local dQ tile ids
  std::vector<double> computes;  // per step
  double total = 0;              // prologue + steps + adds + epilogue
};

struct State {
  std::vector<double> worker_free;
  std::vector<int> worker_chain;     // -1: none
  std::vector<std::uint32_t> left;   // per chain: steps not yet computed
  std::vector<int> pending;          // per chain: step computed, add not done (-1)
  std::vector<int> chain_worker;     // -1: not started
  std::vector<double> tile_free;
  std::vector<int> tile_last;        // worker of the last add, -1 none
  std::vector<int> tile_left;        // adds still to come
  double last_start = 0;
  int last_key = -1;
  double makespan = 0;
  int used_workers = 0;
};

struct Op {
  int worker, chain, step;
  bool add;
  double start;
  int key;
};

class Search {
 public:
  Search(const ScheduleTrace& trace, int workers, const CostModel& cost, double upper, std::int64_t limit)
      : cost_(cost), workers_(workers), best_(upper), limit_(limit) {
    if (cost.overlap_reduce || trace.reduces_dkv || cost.compute <= 0 || cost.compute_masked <= 0 || cost.reduce <= 0)
      throw std::invalid_argument("exact_optimum: needs serial adds, no GQA, and positive c, c_masked, r");
    std::vector<int> local(trace.dq_contributors.size(), -1);
    for (const TraceChain& chain : trace.chains) {
      ChainInfo info;
      info.total = cost.prologue + cost.epilogue;
      for (const TraceStep& step : chain.steps) {
        if (local[step.dq_tile] < 0) local[step.dq_tile] = tiles_++;
        info.tiles.push_back(local[step.dq_tile]);
        info.computes.push_back(step.masked ? cost.compute_masked : cost.compute);
        info.total += info.computes.back() + cost.reduce;
      }
      if (info.tiles.size() > 31) throw std::invalid_argument("exact_optimum: chains longer than 31 steps");
      chains_.push_back(std::move(info));
    }
  }

  OptimumResult run() {
    State s;
    s.worker_free.assign(workers_, 0.0);
    s.worker_chain.assign(workers_, -1);
    s.left.resize(chains_.size());
    for (std::size_t c = 0; c < chains_.size(); ++c) s.left[c] = (1u << chains_[c].tiles.size()) - 1;
    s.pending.assign(chains_.size(), -1);
    s.chain_worker.assign(chains_.size(), -1);
    s.tile_free.assign(tiles_, 0.0);
    s.tile_last.assign(tiles_, -1);
    s.tile_left.assign(tiles_, 0);
    for (const ChainInfo& chain : chains_)
      for (int t : chain.tiles) ++s.tile_left[t];
    // Chains without steps still take a worker for prologue + epilogue.
    for (std::size_t c = 0; c < chains_.size(); ++c) {
      if (!chains_[c].tiles.empty()) continue;
      const int w = static_cast<int>(std::min_element(s.worker_free.begin(), s.worker_free.end()) - s.worker_free.begin());
      s.worker_free[w] += chains_[c].total;
      s.makespan = std::max(s.makespan, s.worker_free[w]);
      s.chain_worker[c] = w;
    }
    root_bound_ = bound(s);
    dfs(s);
    return OptimumResult{best_, nodes_ < limit_, nodes_};
  }

 private:
  double remaining(const State& s, int c) const {
    const ChainInfo& chain = chains_[c];
    double rest = cost_.epilogue + (s.pending[c] >= 0 ? cost_.reduce : 0.0);
    for (std::size_t j = 0; j < chain.tiles.size(); ++j)
      if (s.left[c] >> j & 1u) rest += chain.computes[j] + cost_.reduce;
    return rest;
  }

  double bound(const State& s) const {
    double lb = s.makespan, load = 0, earliest_free = 1e300, longest_unstarted = 0;
    for (int w = 0; w < workers_; ++w) {
      const double from = std::max(s.worker_free[w], s.last_start);
      double finish = from;
      if (s.worker_chain[w] >= 0) finish += remaining(s, s.worker_chain[w]);
      lb = std::max(lb, finish);
      earliest_free = std::min(earliest_free, finish);
      load += finish;
    }
    for (std::size_t c = 0; c < chains_.size(); ++c)
      if (s.chain_worker[c] < 0) {
        load += chains_[c].total;
        longest_unstarted = std::max(longest_unstarted, chains_[c].total);
      }
    if (longest_unstarted > 0) lb = std::max(lb, earliest_free + longest_unstarted);
    lb = std::max(lb, load / workers_);
    for (int t = 0; t < tiles_; ++t)
      if (s.tile_left[t] > 0) lb = std::max(lb, std::max(s.tile_free[t], s.last_start) + s.tile_left[t] * cost_.reduce);
    return lb;
  }

  void candidates(const State& s, std::vector<Op>& ops) const {
    bool fresh_tried = false;
    for (int w = 0; w < workers_; ++w) {
      const int c = s.worker_chain[w];
      if (c >= 0) {
        if (s.pending[c] >= 0) {
          const int j = s.pending[c], t = chains_[c].tiles[j];
          double start = s.worker_free[w];
          if (s.tile_last[t] >= 0) start = std::max(start, s.tile_free[t] + (s.tile_last[t] == w ? 0.0 : cost_.handoff));
          ops.push_back(Op{w, c, j, true, start, key(c, j, true)});
        } else {
          for (std::size_t j = 0; j < chains_[c].tiles.size(); ++j)
            if (s.left[c] >> j & 1u) ops.push_back(Op{w, c, static_cast<int>(j), false, s.worker_free[w], key(c, j, false)});
        }
        continue;
      }
      // Workers never used are interchangeable: try only the first of them.
      const bool fresh = w >= s.used_workers;
      if (fresh && fresh_tried) continue;
      fresh_tried = fresh_tried || fresh;
      for (std::size_t ch = 0; ch < chains_.size(); ++ch)
        if (s.chain_worker[ch] < 0)
          for (std::size_t j = 0; j < chains_[ch].tiles.size(); ++j)
            ops.push_back(Op{w, static_cast<int>(ch), static_cast<int>(j), false, s.worker_free[w], key(ch, j, false)});
    }
  }

  static int key(std::size_t chain, std::size_t step, bool add) {
    return static_cast<int>((chain * 32 + step) * 2 + (add ? 1 : 0));
  }

  void apply(State& s, const Op& op) const {
    const ChainInfo& chain = chains_[op.chain];
    double end;
    if (op.add) {
      end = op.start + cost_.reduce;
      const int t = chain.tiles[op.step];
      s.tile_free[t] = end;
      s.tile_last[t] = op.worker;
      --s.tile_left[t];
      s.pending[op.chain] = -1;
      if (s.left[op.chain] == 0) {  // chain done: epilogue, worker released
        end += cost_.epilogue;
        s.worker_chain[op.worker] = -1;
      }
    } else {
      double duration = chain.computes[op.step];
      if (s.chain_worker[op.chain] < 0) {
        duration += cost_.prologue;
        s.chain_worker[op.chain] = op.worker;
        s.worker_chain[op.worker] = op.chain;
        s.used_workers = std::max(s.used_workers, op.worker + 1);
      }
      end = op.start + duration;
      s.left[op.chain] &= ~(1u << op.step);
      s.pending[op.chain] = op.step;
    }
    s.worker_free[op.worker] = end;
    s.makespan = std::max(s.makespan, end);
    s.last_start = op.start;
    s.last_key = op.key;
  }

  void dfs(const State& s) {
    if (++nodes_ >= limit_ || best_ <= root_bound_ + kEps) return;
    std::vector<Op> ops;
    candidates(s, ops);
    if (ops.empty()) {
      best_ = std::min(best_, s.makespan);
      return;
    }
    std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.start < b.start || (a.start == b.start && a.key < b.key); });
    for (const Op& op : ops) {
      if (op.start < s.last_start - kEps) continue;
      if (op.start < s.last_start + kEps && op.key < s.last_key) continue;
      State next = s;
      apply(next, op);
      if (bound(next) >= best_ - kEps) continue;
      dfs(next);
    }
  }

  CostModel cost_;
  int workers_;
  std::vector<ChainInfo> chains_;
  int tiles_ = 0;
  double best_;
  double root_bound_ = 0;
  std::int64_t limit_;
  std::int64_t nodes_ = 0;
};

}  // namespace

OptimumResult exact_optimum(const ScheduleTrace& trace, int workers, const CostModel& cost, double upper_bound,
                            std::int64_t node_limit) {
  return Search(trace, workers, cost, upper_bound, node_limit).run();
}

}  // namespace dash_attn::model
