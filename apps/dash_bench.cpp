// dash-bench: forward and backward of dash_attn on the standard grid of
// docs/benchmarks.md or on chosen shapes, every backward schedule
// (deterministic and atomic): median time, TFLOPS and their share of the
// device's measured wgmma ceiling, fp64 verification, bitwise reruns of the
// deterministic backward. Prints a table with a repro command under each row
// and writes JSON/CSV. Without an sm_90 GPU it says so and runs the schedule
// model instead.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench/cases.hpp"
#include "bench/device_info.hpp"
#include "bench/device_problem.hpp"
#include "bench/model_rows.hpp"
#include "bench/options.hpp"
#include "bench/report.hpp"
#include "bench/repro.hpp"
#include "bench/result_files.hpp"
#include "bench/timing.hpp"
#include "bench/verify.hpp"
#include "bench/wgmma_ceiling.hpp"
#include "dash_attn/dash_attn.hpp"

namespace dash_attn::bench {
namespace {

constexpr int kWarmup = 3;

std::string status_of(const Error& e) { return e.code() == ErrorCode::kNotImplemented ? "not implemented" : e.what(); }

Row base_row(const BenchCase& c, const char* pass) {
  Row r;
  r.pass = pass, r.shape = c.shape, r.mask = mask_text(c);
  return r;
}

// Equal reruns out of `runs`: dQ, dK and dV compared bitwise with the first run.
std::string bitwise_reruns(const DeviceProblem& p, const BackwardArgs& args, const Options& o, int runs) {
  const auto bits = [&] {
    return std::vector<std::vector<uint16_t>>{p.download_bits(p.dq(), p.q_elements()),
                                              p.download_bits(p.dk(), p.kv_elements()),
                                              p.download_bits(p.dv(), p.kv_elements())};
  };
  const auto first = bits();
  int equal = 0;
  for (int run = 0; run < runs; ++run) {
    backward(args, o, nullptr);
    DASH_CUDA_CHECK(cudaDeviceSynchronize());
    equal += bits() == first;
  }
  return std::to_string(equal) + "/" + std::to_string(runs);
}

class CaseRunner {
 public:
  CaseRunner(const BenchOptions& o, const BenchCase& c, const RunInfo& info, std::vector<Row>& rows)
      : o_(o), c_(c), info_(info), rows_(rows), problem_(c.shape, o.dtype, case_seed(c)), verifier_(o, c, problem_),
        options_(case_options(c)) {}

  void run() {
    const bool have_forward = forward();
    if (!o_.backward) return;
    for (const ScheduleKind kind : o_.schedules) backward(kind, have_forward);
  }

 private:
  // Printed as soon as measured, so a run stopped by a time limit still shows what it did.
  void emit(const Row& r) {
    rows_.push_back(r);
    std::fputs(table_row(r, info_.ceiling_tflops).c_str(), stdout);
    std::fflush(stdout);
  }

  // A check that cannot run (e.g. the reduced problem fails) reads "error"
  // and counts as a failure; the row keeps its timing and status.
  template <class CheckCall>
  void verify(Row& r, CheckCall check_call) {
    if (!verifier_.active()) return;
    r.verified_on = verifier_.on();
    try {
      const Check check = check_call();
      r.max_error = check.max_error, r.verified = check.ok ? "yes" : "NO";
    } catch (const Error& e) {
      r.verified = "error", r.verified_on += std::string(": ") + e.what();
    }
  }

  // The timed forward, or one untimed call when only the backward is asked for.
  bool forward() {
    Row r = base_row(c_, "fwd");
    r.repro = repro_command(o_, c_, Pass::kForward, ScheduleKind::kAuto);
    bool ran = false;
    try {
      const ForwardArgs args = problem_.forward_args();
      if (!o_.forward) {
        dash_attn::forward(args, options_, nullptr);
        DASH_CUDA_CHECK(cudaDeviceSynchronize());
        return true;
      }
      const Timing t = time_calls([&] { dash_attn::forward(args, options_, nullptr); }, kWarmup, o_.repetitions,
                                    o_.settle_ms);
      DASH_CUDA_CHECK(cudaDeviceSynchronize());
      r.median_ms = t.median_ms, r.min_ms = t.min_ms, r.max_ms = t.max_ms;
      r.tflops = forward_flops(c_) / (t.median_ms * 1e9);
      r.status = "ok";
      ran = true;
      verify(r, [&] { return verifier_.forward(options_); });
    } catch (const Error& e) {
      r.status = status_of(e);
      forward_error_ = r.status;
    }
    if (o_.forward) emit(r);
    return ran;
  }

  void backward(ScheduleKind kind, bool have_forward) {
    Row r = base_row(c_, "bwd");
    r.schedule = std::string(to_string(kind));
    r.repro = repro_command(o_, c_, Pass::kBackward, kind);
    Options o = options_;
    o.schedule = kind;
    o.deterministic = r.deterministic = kind != ScheduleKind::kAtomic;
    if (!have_forward) {
      r.status = "needs forward (" + forward_error_ + ")";
      return emit(r);
    }
    try {
      const BackwardArgs args = problem_.backward_args(o);
      const Timing t = time_calls([&] { dash_attn::backward(args, o, nullptr); }, kWarmup, o_.repetitions,
                                    o_.settle_ms);
      DASH_CUDA_CHECK(cudaDeviceSynchronize());
      r.median_ms = t.median_ms, r.min_ms = t.min_ms, r.max_ms = t.max_ms;
      r.tflops = 2.5 * forward_flops(c_) / (t.median_ms * 1e9);
      r.status = "ok";
      verify(r, [&] { return verifier_.backward(o); });
      if (o.deterministic && o_.determinism_runs > 0) r.bitwise = bitwise_reruns(problem_, args, o, o_.determinism_runs);
    } catch (const Error& e) {
      r.status = status_of(e);
    }
    emit(r);
  }

  const BenchOptions& o_;
  const BenchCase& c_;
  const RunInfo& info_;
  std::vector<Row>& rows_;
  DeviceProblem problem_;
  CaseVerifier verifier_;
  Options options_;
  std::string forward_error_ = "forward not run";
};

// On stderr, so the table on stdout and the result files stay as they were.
void report_progress(std::size_t index, std::size_t total, const BenchCase& c) {
  std::fputs(progress_line(index + 1, total, c).c_str(), stderr);
  std::fflush(stderr);
}

void save_results(const BenchOptions& o, const RunInfo& info, const std::vector<Row>& rows) {
  if (!o.json_path.empty()) save_json(o.json_path, info, rows);
  if (!o.csv_path.empty()) save_csv(o.csv_path, info, rows);
}

int run_model(const BenchOptions& o, RunInfo& info, const std::string& reason) {
  info.mode = "model";
  cudaRuntimeGetVersion(&info.cuda_runtime);
  std::printf("dash-bench: %s.\nRunning the schedule model instead: modeled backward times (docs/schedules.md), costs\n"
              "fitted to H200 runs of the kernel (apps/bench/model_rows.cpp), %d workers; no forward, no verification, no bitwise reruns.\n",
              reason.c_str(), kModelWorkers);
  std::fputs(table_header().c_str(), stdout);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Row> rows;
  const std::vector<BenchCase> cases = bench_cases(o);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    report_progress(i, cases.size(), c);
    for (const Row& r : model_rows(o, c, threads)) {
      rows.push_back(r);
      std::fputs(table_row(r, 0).c_str(), stdout);
    }
    std::fflush(stdout);
    save_results(o, info, rows);
  }
  return 0;
}

int run_gpu(const BenchOptions& o, RunInfo& info) {
  describe_device(info);
  std::printf("device: %s, %d SMs, %d MHz peak; driver %s, CUDA runtime %s, driver API %s; commit %s; %s\n",
              info.gpu.c_str(), info.sms, info.sm_clock_mhz, info.driver_version.c_str(),
              cuda_version_text(info.cuda_runtime).c_str(), cuda_version_text(info.cuda_driver).c_str(),
              info.commit.c_str(), info.date_utc.c_str());
  try {
    const WgmmaCeiling ceiling = measure_wgmma_ceiling();
    info.ceiling_tflops = ceiling.tflops;
    info.ceiling_kernel = ceiling.kernel;
    std::printf("wgmma ceiling: %.1f TFLOPS dense bf16 (%s; %.3f ms per launch)\n", ceiling.tflops,
                ceiling.kernel.c_str(), ceiling.median_ms);
  } catch (const Error& e) {
    std::printf("wgmma ceiling: not measured (%s)\n", e.what());
  }
  std::fputs(table_header().c_str(), stdout);
  std::vector<Row> rows;
  const std::vector<BenchCase> cases = bench_cases(o);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    report_progress(i, cases.size(), c);
    CaseRunner(o, c, info, rows).run();
    save_results(o, info, rows);  // rewritten after each case: a stopped run keeps what it measured
  }
  return std::any_of(rows.begin(), rows.end(), row_failed) ? 1 : 0;
}

}  // namespace
}  // namespace dash_attn::bench

int main(int argc, char** argv) {
  using namespace dash_attn::bench;
  BenchOptions options;
  try {
    options = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dash-bench: %s\n(dash-bench --help lists the options)\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  RunInfo info;
  info.commit = options.commit;
  info.date_utc = utc_timestamp(std::time(nullptr));
  info.command = "dash-bench";
  for (int i = 1; i < argc; ++i) info.command += std::string(" ") + argv[i];
  info.dtype = options.dtype;
  info.repetitions = options.repetitions;
  info.determinism_runs = options.determinism_runs;
  try {
    const std::string no_gpu = options.model ? "schedule model asked for (--model)" : sm90_unavailable_reason();
    return no_gpu.empty() ? run_gpu(options, info) : run_model(options, info, no_gpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dash-bench: %s\n", e.what());
    return 1;
  }
}
