// Reads the backward rows of a dash-bench JSON file (apps/bench/result_files.cpp
// writes it: a flat object with a "rows" array of flat objects) with
// nlohmann-json; malformed text, or a row it cannot use, is an error naming
// the line it was found on.
#pragma once

#include <string>
#include <vector>

#include "dash_attn/types.hpp"

namespace dash_attn::model {

struct BenchRow {
  int head_dim = 0;
  bool causal = false;
  int seqlen = 0;
  ScheduleKind schedule = ScheduleKind::kAtomic;
  double median_ms = 0;
};

struct BenchFile {
  std::string device, commit;
  int sms = 0;
  std::vector<BenchRow> backward;  // rows with "pass": "bwd" and "status": "ok", in file order
};

// Throws std::invalid_argument("line N: ...") on malformed text, a missing
// field or a file without backward rows.
BenchFile parse_bench_json(const std::string& text);

}  // namespace dash_attn::model
