// The one-line command that reruns one row of a dash-bench table by itself:
// the same shape, mask, pass, schedule, dtype and checks (inputs depend only
// on the case, see case_seed), with no grid and no output files.
#pragma once

#include <string>

#include "bench/cases.hpp"

namespace dash_attn::bench {

// schedule is ignored for Pass::kForward. Options left at their defaults
// are not spelled out.
std::string repro_command(const BenchOptions& options, const BenchCase& c, Pass pass, ScheduleKind schedule);

}  // namespace dash_attn::bench
