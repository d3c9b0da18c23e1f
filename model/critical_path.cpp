#include "critical_path.hpp"

#include <algorithm>
#include <map>
#include <queue>

namespace dash_attn::model {
namespace {

enum class NodeKind { kCompute, kReduce, kJoin };

struct Edge {
  int to;
  double weight;
  bool cross;
};

class Dag {
 public:
  int add(double duration, NodeKind kind) {
    duration_.push_back(duration);
    kind_.push_back(kind);
    out_.emplace_back();
    return static_cast<int>(duration_.size()) - 1;
  }
  void link(int from, int to, double weight = 0, bool cross = false) {
    if (from >= 0) out_[from].push_back(Edge{to, weight, cross});
  }

  CriticalPath longest_path() const {
    const int n = static_cast<int>(duration_.size());
    std::vector<int> indegree(n, 0), pred(n, -1);
    std::vector<double> start(n, 0), pred_weight(n, 0);
    std::vector<bool> pred_cross(n, false);
    for (const auto& edges : out_)
      for (const Edge& e : edges) ++indegree[e.to];
    std::queue<int> ready;
    for (int v = 0; v < n; ++v)
      if (indegree[v] == 0) ready.push(v);
    int visited = 0, last = -1;
    double best = 0;
    while (!ready.empty()) {
      const int v = ready.front();
      ready.pop();
      ++visited;
      const double finish = start[v] + duration_[v];
      if (last < 0 || finish > best) best = finish, last = v;
      for (const Edge& e : out_[v]) {
        const double candidate = finish + e.weight;
        if (pred[e.to] < 0 || candidate > start[e.to]) {
          start[e.to] = candidate;
          pred[e.to] = v;
          pred_weight[e.to] = e.weight;
          pred_cross[e.to] = e.cross;
        }
        if (--indegree[e.to] == 0) ready.push(e.to);
      }
    }
    CriticalPath path;
    if (visited < n) {
      path.cyclic = true;
      return path;
    }
    path.length = best;
    for (int v = last; v >= 0; v = pred[v]) {
      ++path.nodes;
      (kind_[v] == NodeKind::kReduce ? path.reduce : path.compute) += duration_[v];
      path.handoff += pred_weight[v];
      path.cross_worker_edges += pred_cross[v] && pred_weight[v] > 0 ? 1 : 0;
    }
    return path;
  }

 private:
  std::vector<double> duration_;
  std::vector<NodeKind> kind_;
  std::vector<std::vector<Edge>> out_;
};

struct Contribution {
  int node;
  int worker;
};

}  // namespace

CriticalPath critical_path(const ScheduleTrace& trace, const SimResult& sim, const CostModel& cost) {
  Dag dag;
  // Per ordered target: contributions by rank, linked in rank order at the end.
  std::vector<std::map<int, Contribution>> dq_order(trace.dq_contributors.size()), dkv_order(trace.num_dkv_tiles);
  const bool serial = !cost.overlap_reduce;
  const int writers = cost.writers();
  const bool drain = cost.drains_between_chains();
  for (int w = 0; w < static_cast<int>(sim.worker_items.size()); ++w) {
    int last_compute = -1;                   // last node of the worker's compute stream
    std::vector<int> last_reduce(writers, -1);  // per dQ stage: its last add
    int tiles = 0;                           // stage of the next tile = tiles mod writers
    int latest_reduce = -1;                  // the worker's last add (serial mode waits for it)
    for (int item : sim.worker_items[w]) {
      const TraceItem& it = trace.items[item];
      for (int c = it.first_chain; c < it.first_chain + it.num_chains; ++c) {
        const TraceChain& chain = trace.chains[c];
        const int prologue = dag.add(cost.prologue, NodeKind::kCompute);
        dag.link(last_compute, prologue);
        if (drain)
          for (int r : last_reduce) dag.link(r, prologue);
        last_compute = prologue;
        for (const TraceStep& step : chain.steps) {
          const int compute = dag.add(step.masked ? cost.compute_masked : cost.compute, NodeKind::kCompute);
          dag.link(last_compute, compute);
          if (serial) dag.link(latest_reduce, compute);
          // The tile is handed to its stage's writer once computed and once
          // that stage's previous add freed the buffer.
          int& stage_reduce = last_reduce[tiles++ % writers];
          const int handed = dag.add(0, NodeKind::kJoin);
          dag.link(compute, handed);
          dag.link(stage_reduce, handed);
          const int reduce = dag.add(cost.reduce, NodeKind::kReduce);
          dag.link(handed, reduce);
          if (trace.ordered) dq_order[step.dq_tile][step.rank] = Contribution{reduce, w};
          last_compute = handed;
          stage_reduce = latest_reduce = reduce;
        }
        const int epilogue = dag.add(cost.epilogue, NodeKind::kCompute);
        dag.link(last_compute, epilogue);
        if (serial) dag.link(latest_reduce, epilogue);
        last_compute = epilogue;
        if (trace.reduces_dkv) {
          const int add = dag.add(cost.reduce_dkv, NodeKind::kCompute);
          dag.link(last_compute, add);
          if (trace.ordered) dkv_order[chain.dkv_tile][chain.dkv_rank] = Contribution{add, w};
          last_compute = add;
        }
      }
    }
  }
  for (const auto* orders : {&dq_order, &dkv_order})
    for (const auto& order : *orders) {
      const Contribution* previous = nullptr;
      for (const auto& [rank, contribution] : order) {
        if (previous != nullptr) {
          const bool cross = previous->worker != contribution.worker;
          dag.link(previous->node, contribution.node, cross ? cost.handoff : 0, cross);
        }
        previous = &contribution;
      }
    }
  return dag.longest_path();
}

}  // namespace dash_attn::model
