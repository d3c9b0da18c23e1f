// Calibration of the cost model: the fit recovers known costs from
// measurements the model itself generated, the dash-bench reader reads what
// dash-bench writes, and dash-model --calibrate rejects a malformed file with
// a message naming the line.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "bench_json.hpp"
#include "calibration.hpp"

namespace dash_attn::model {
namespace {

// A small standard-like grid (16 workers, 4 heads, 128x128 tiles, 1k
// tokens): every schedule on both masks at three lengths, fast to simulate.
std::vector<CalibrationPoint> synthetic_points(const CostModel& truth, int workers) {
  std::vector<CalibrationPoint> points;
  for (bool causal : {false, true})
    for (int seqlen : {256, 512, 1024})
      for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift}) {
        schedule::TileProblem problem;
        problem.batch = 1024 / seqlen;
        problem.heads_q = problem.heads_kv = 4;
        problem.block_m = problem.block_n = 128;
        problem.causal = causal;
        problem.seqlen_q = problem.seqlen_k = seqlen;
        points.push_back(CalibrationPoint{problem, kind, 0});
      }
  const std::vector<double> times = predict(points, truth, workers, 1);
  for (std::size_t i = 0; i < points.size(); ++i) points[i].measured = times[i];
  return points;
}

TEST(ModelCalibration, RecoversTheCostsThatGeneratedTheMeasurements) {
  // r = 0.5c and s = 1.0c lie on the default grid; c, c_masked and the
  // chain cost are continuous (Gauss-Newton).
  CostModel truth;
  truth.compute = 0.02;
  truth.compute_masked = 0.013;
  truth.reduce = 0.01;
  truth.handoff = 0.02;
  truth.prologue = truth.epilogue = 0.015;
  truth.overlap_reduce = true;  // the calibration models the kernel's writers:
  truth.dq_writers = 2;         // one per dQ stage,
  truth.drain_between_chains = false;  // and the next chain starts while they add
  const int workers = 16;
  CalibrationOptions options;
  options.workers = workers;
  const Calibration fit = calibrate(synthetic_points(truth, workers), options);
  const double tol = 1e-6;
  EXPECT_NEAR(fit.cost.compute, truth.compute, tol * truth.compute);
  EXPECT_NEAR(fit.cost.compute_masked, truth.compute_masked, tol * truth.compute);
  EXPECT_NEAR(fit.cost.reduce, truth.reduce, tol * truth.compute);
  EXPECT_NEAR(fit.cost.handoff, truth.handoff, tol * truth.compute);
  EXPECT_NEAR(fit.cost.prologue + fit.cost.epilogue, truth.prologue + truth.epilogue, tol * truth.compute);
  EXPECT_LT(fit.rms_relative_error, 1e-6);
}

TEST(ModelCalibration, NeedsAtomicRows) {
  std::vector<CalibrationPoint> points = synthetic_points(CostModel{}, 16);
  std::erase_if(points, [](const CalibrationPoint& p) { return p.schedule == ScheduleKind::kAtomic; });
  EXPECT_THROW(calibrate(points, CalibrationOptions{}), std::invalid_argument);
}

TEST(ModelCalibration, SpearmanOfRanks) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-12);
}

// The header, one forward row and one backward row, as dash-bench writes them.
const char* kBenchFile = R"({
  "commit": "c3db9ab",
  "device": "NVIDIA H200",
  "sms": 132,
  "rows": [
    {"impl": "dash_attn", "pass": "fwd", "schedule": "-", "deterministic": false, "head_dim": 64, "mask": "full", "seqlen": 512, "median_ms": 0.2024, "status": "ok"},
    {"impl": "dash_attn", "pass": "bwd", "schedule": "symmetric_shift", "deterministic": true, "head_dim": 128, "mask": "causal", "seqlen": 1024, "median_ms": 1.5e-1, "status": "ok"}
  ]
}
)";

TEST(ModelCalibration, ReadsTheBackwardRowsOfADashBenchFile) {
  const BenchFile file = parse_bench_json(kBenchFile);
  EXPECT_EQ(file.sms, 132);
  EXPECT_EQ(file.commit, "c3db9ab");
  ASSERT_EQ(file.backward.size(), 1u);
  EXPECT_EQ(file.backward[0].head_dim, 128);
  EXPECT_TRUE(file.backward[0].causal);
  EXPECT_EQ(file.backward[0].seqlen, 1024);
  EXPECT_EQ(file.backward[0].schedule, ScheduleKind::kSymmetricShift);
  EXPECT_DOUBLE_EQ(file.backward[0].median_ms, 0.15);
}

std::string error_of(const std::string& text) {
  try {
    parse_bench_json(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ModelCalibration, ReaderNamesTheLineOfAnError) {
  std::string truncated = kBenchFile;
  truncated.resize(truncated.find("\"median_ms\": 1.5e-1"));
  EXPECT_NE(error_of(truncated).find("line 7"), std::string::npos) << error_of(truncated);
  std::string bad_schedule = kBenchFile;
  bad_schedule.replace(bad_schedule.find("symmetric_shift"), 15, "spiral");
  EXPECT_NE(error_of(bad_schedule).find("line 7: unknown schedule 'spiral'"), std::string::npos);
  EXPECT_NE(error_of(R"({"sms": 132, "rows": []})").find("no backward rows"), std::string::npos);
}

TEST(ModelCalibration, CliRejectsAMalformedFile) {
#ifndef DASH_MODEL_EXE
  GTEST_SKIP() << "dash-model is not built (DASH_BUILD_APPS=OFF)";
#else
  const std::string dir = ::testing::TempDir();
  const std::string input = dir + "dash_calibration_malformed.json", errors = dir + "dash_calibration_stderr.txt";
  std::ofstream(input) << "{\n  \"sms\": 132,\n  \"rows\": [\n    {\"pass\": \"bwd\", \"status\": \"ok\", \"head_dim\": 64,,}\n";
  const std::string command = std::string("\"") + DASH_MODEL_EXE + "\" --calibrate \"" + input + "\" 2> \"" + errors + "\"";
  const int status = std::system(command.c_str());
  std::stringstream message;
  message << std::ifstream(errors).rdbuf();
  EXPECT_NE(status, 0);
  EXPECT_NE(message.str().find("dash-model: --calibrate: " + input + ": line 4:"), std::string::npos) << message.str();
  std::remove(input.c_str());
  std::remove(errors.c_str());
#endif
}

}  // namespace
}  // namespace dash_attn::model
