// Event simulation of a schedule on W resident workers (CTAs): the makespan,
// every worker's timeline, and deadlock detection.
#pragma once

#include <string>
#include <vector>

#include "cost_model.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::model {

// How items reach workers. kDynamic: a free worker claims the next item of
// the claim order (the kernel's atomic counter). kStatic: worker w runs items
// w, w + W, w + 2W, ... (a persistent grid indexed by blockIdx; the paper's
// "chain i on SM i", which evaluate() pairs with the head-major claim order).
enum class Assignment { kDynamic, kStatic };

enum class SegmentKind {
  kPrologue,
  kCompute,
  kComputeStall,  // overlapped mode: tile done, shared-memory buffer still being added
  kReduceWait,    // waiting for the dQ counter to reach the rank
  kReduce,
  kEpilogue,
  kDkvWait,
  kDkvReduce,
};

struct Segment {
  double start = 0, end = 0;
  SegmentKind kind = SegmentKind::kCompute;
  int chain = 0;
  int step = 0;
  bool on_writer = false;  // overlapped mode: drawn on the dQ writer's lane
};

struct SimResult {
  bool deadlock = false;
  std::string deadlock_reason;  // which worker waits for what, when deadlocked
  double makespan = 0;
  std::vector<std::vector<Segment>> timelines;  // per worker
  std::vector<double> busy;                     // per worker: time spent computing or adding
  std::vector<int> item_worker;                 // per item, -1 if never claimed
  std::vector<std::vector<int>> worker_items;   // per worker, in execution order
};

SimResult simulate(const ScheduleTrace& trace, int workers, Assignment assignment, const CostModel& cost);

}  // namespace dash_attn::model
