// dash-bench's results: one Row per measured (or modeled) pass, the run's
// provenance, and the writers: the printed table, JSON (read back by
// dash-model --calibrate and bench/*.py: a flat object with a "rows" array of
// flat objects) and CSV (one line per row, provenance repeated on each).
#pragma once

#include <ctime>
#include <iosfwd>
#include <string>
#include <vector>

#include "dash_attn/types.hpp"

namespace dash_attn::bench {

struct RunInfo {
  std::string mode = "gpu";  // "gpu" or "model" (no GPU: the schedule model's times)
  std::string commit = "unknown", date_utc, command;
  std::string gpu = "none", driver_version = "unknown";
  int cuda_runtime = 0, cuda_driver = 0;  // 1000 * major + 10 * minor
  int sms = 0, sm_clock_mhz = 0;          // clock: the device's peak, as CUDA reports it
  DType dtype = DType::kBF16;
  int repetitions = 0, determinism_runs = 0;
  double ceiling_tflops = 0;  // measured dense bf16 wgmma throughput; 0: not measured
  std::string ceiling_kernel;
};

struct Row {
  std::string impl = "dash_attn", pass, schedule = "-", mask, status;
  ProblemShape shape;
  bool deterministic = false;
  double median_ms = 0, min_ms = 0, max_ms = 0, tflops = 0;
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

void write_json(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows);
void write_csv(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows);
// Writes `path` through a temporary file and a rename, so a run stopped
// mid-write leaves the previous complete file. Throws std::runtime_error.
void save_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
void save_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

std::string json_escape(const std::string& text);
std::string csv_field(const std::string& text);

}  // namespace dash_attn::bench
