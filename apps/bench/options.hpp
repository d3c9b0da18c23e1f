// dash-bench's command line: what to run (the standard grid of
// docs/benchmarks.md, a part of it, or chosen shapes), how to check it and
// where to write the results. Host-only, so the CPU tests parse with it.
#pragma once

#include <string>
#include <vector>

#include "cli_values.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::bench {

// The standard grid: 16k tokens in total (batch = 16384 / seqlen) and hidden
// 2048 (heads = 2048 / head_dim), as the FlashAttention-3 and DASH papers.
inline constexpr int kGridTokens = 16384;
inline constexpr int kGridHidden = 2048;

enum class Pass { kForward, kBackward };

// --window L,R and --softcap X (issue 18), FlashAttention's meaning: every
// case runs with them (a causal case's right bound is 0); the ScoreMods rows
// of the kernel table serve them.
struct ScoreMods {
  int window_left = -1, window_right = -1;  // -1: unbounded
  double softcap = 0;                       // 0: off
  bool has_window() const { return window_left >= 0 || window_right >= 0; }
};

// " window L,R" and " softcap X" for the mods set, each keyword after
// `prefix` ("" for the mask column, "--" for a repro line) and the softcap
// with `digits` significant digits.
std::string score_mods_text(const ScoreMods& mods, const char* prefix, int digits);

struct BenchOptions {
  std::vector<int> head_dims{64, 128};
  std::vector<int> seqlens{512, 1024, 2048, 4096, 8192, 16384};
  std::vector<ProblemShape> shapes;  // --shape: replaces the grid when not empty
  std::vector<bool> masks{false, true};
  std::vector<ScheduleKind> schedules{ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                      ScheduleKind::kShift, ScheduleKind::kSymmetricShift, ScheduleKind::kAuto};
  bool forward = true, backward = true;  // --passes
  DType dtype = DType::kBF16;
  ScoreMods mods;
  int q_heads_per_chain = 0;  // Options::q_heads_per_chain of every case (0: the library's choice)
  int repetitions = 30;
  int settle_ms = 500;  // idle before each row's timed calls (bench/timing.hpp)
  int determinism_runs = 10;
  // Rows with both seqlens <= this are checked on a (batch 0, kv-head 0)
  // slice of the timed problem; the fp64 check costs O(seqlen^2 * head_dim)
  // per head on one CPU core. 0: no slice check.
  int verify_max_seqlen = 2048;
  // --verify: rows above verify_max_seqlen are checked too, on a reduced
  // problem of the same head_dim, GQA ratio, mask and schedule.
  bool verify = false;
  bool model = false;  // --model: the schedule model even where a GPU is
  bool help = false;
  std::string json_path, csv_path;
  std::string commit = "unknown";
};

// A malformed command line; the message names the flag and what it expects.
using UsageError = cli::UsageError;

// args excludes the program name; each option takes --key value or
// --key=value (CLI11). Throws UsageError.
BenchOptions parse_options(const std::vector<std::string>& args);

// The --help text: every option with its values and default.
std::string usage_text();

// "batch,seqlen_q,seqlen_k,heads_q,heads_kv,head_dim", the --shape syntax.
std::string shape_text(const ProblemShape& shape);

}  // namespace dash_attn::bench
