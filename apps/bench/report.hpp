// dash-bench's results: one Row per measured (or modeled) pass, the run's
// provenance, the printed table and the progress line. The result files
// (JSON, CSV) are written by bench/result_files.hpp.
#pragma once

#include <cstddef>
#include <ctime>
#include <string>
#include <vector>

#include "bench/cases.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::bench {

// What cannot be read stays at its "unknown" value (below); the result files
// write it as null (JSON) and an empty field (CSV).
struct RunInfo {
  std::string mode = "gpu";  // "gpu" or "model" (no GPU: the schedule model's times)
  std::string commit = "unknown", date_utc, command;
  std::string gpu = "none", driver_version = "unknown";  // "none", "unknown": not known
  int cuda_runtime = 0, cuda_driver = 0;  // 1000 * major + 10 * minor; 0: unknown
  int sms = 0, sm_clock_mhz = 0;          // clock: the device's peak, as CUDA reports it; 0: unknown
  DType dtype = DType::kBF16;
  int repetitions = 0, determinism_runs = 0;
  double ceiling_tflops = 0;  // measured dense bf16 wgmma throughput; 0: not measured
  std::string ceiling_kernel;  // empty: not measured
};

struct Row {
  std::string impl = "dash_attn", pass, schedule = "-", mask, status;
  ProblemShape shape;
  bool deterministic = false;
  double median_ms = 0, min_ms = 0, max_ms = 0, tflops = 0;  // 0: not timed (the row failed)
  double max_error = -1;  // -1: not verified
  std::string verified = "-";     // yes, NO, error (the check could not run) or -
  std::string verified_on = "-";  // "slice" (of the timed problem), "reduced B,SQ,SK,HQ,HKV,D" or -
  std::string bitwise = "-";      // equal/total reruns, deterministic backward only
  std::string repro;
};

// tflops as a percentage of the ceiling; NaN when no ceiling was measured.
double ceiling_percent(double tflops, double ceiling_tflops);

// A verification that failed or could not run, or a bitwise rerun that differed.
bool row_failed(const Row& row);

std::string utc_timestamp(std::time_t time);  // 2026-11-30T08:15:00Z
std::string cuda_version_text(int version);   // 13000 -> 13.0; 0 -> unknown

std::string table_header();
// The row and, indented below it, its repro command; newline-terminated.
std::string table_row(const Row& row, double ceiling_tflops);

// "[3/24] 4,4096,4096,16,16,128 causal\n": case `number` (from 1) of `total`,
// printed to stderr before the case runs so a long grid shows how far it is.
std::string progress_line(std::size_t number, std::size_t total, const BenchCase& c);

}  // namespace dash_attn::bench
