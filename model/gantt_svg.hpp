// Gantt chart of simulated schedules as SVG, in the style of the DASH
// paper's Figures 2-3: one row per worker, time to the right; computes
// coloured by head and labelled "kv,q", adds in orange, waits hatched grey.
// In the overlapped mode each worker row has a thin lane below for its dQ
// writer.
#pragma once

#include <string>
#include <vector>

#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::model {

struct GanttPanel {
  std::string title;
  const ScheduleTrace* trace = nullptr;
  const SimResult* sim = nullptr;
};

// All panels share one time scale, so their lengths compare at a glance.
std::string gantt_svg(const std::vector<GanttPanel>& panels);

}  // namespace dash_attn::model
