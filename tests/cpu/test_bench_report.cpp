// dash-bench's results (apps/bench): the JSON it writes is what
// dash-model --calibrate reads, the CSV has one field per header column with
// quoting where a field needs it, the table shows the ceiling share and a
// repro line, and the no-GPU fallback models every schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "bench/model_rows.hpp"
#include "bench/options.hpp"
#include "bench/report.hpp"
#include "bench_json.hpp"

namespace dash_attn::bench {
namespace {

RunInfo sample_info() {
  RunInfo info;
  info.commit = "abc1234";
  info.date_utc = "2026-11-30T08:15:00Z";
  info.command = "dash-bench --grid quick --json \"out.json\"";
  info.gpu = "NVIDIA H200";
  info.driver_version = "580.65.06";
  info.cuda_runtime = info.cuda_driver = 13000;
  info.sms = 132;
  info.sm_clock_mhz = 1980;
  info.repetitions = 30;
  info.determinism_runs = 10;
  info.ceiling_tflops = 800;
  info.ceiling_kernel = "wgmma m64n256k16";
  return info;
}

std::vector<Row> sample_rows() {
  Row fwd;
  fwd.pass = "fwd", fwd.mask = "causal", fwd.status = "ok";
  fwd.shape = ProblemShape{16, 1024, 1024, 16, 16, 128};
  fwd.median_ms = fwd.min_ms = fwd.max_ms = 0.25, fwd.tflops = 400;
  fwd.max_error = 1.5e-3, fwd.verified = "yes", fwd.verified_on = "slice";
  fwd.repro = "dash-bench --shape 16,1024,1024,16,16,128 --masks causal --passes fwd --dtype bf16";
  Row bwd = fwd;
  bwd.pass = "bwd", bwd.schedule = "shift", bwd.deterministic = true, bwd.tflops = 300, bwd.median_ms = 0.8;
  bwd.verified_on = "reduced 1,1024,1024,2,2,128", bwd.bitwise = "10/10";
  bwd.repro = "dash-bench --shape 16,1024,1024,16,16,128 --masks causal --passes bwd --schedules shift --dtype bf16";
  Row failed = bwd;
  failed.schedule = "fa3", failed.status = "bad \"thing\",\nhappened", failed.max_error = -1, failed.verified = "-";
  return {fwd, bwd, failed};
}

// Splits one CSV line, honouring quoted fields ("" is a quote inside one).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
    else if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) fields.emplace_back();
    else fields.back() += ch;
  }
  return fields;
}

// CSV records; a quoted field may span lines.
std::vector<std::string> csv_records(const std::string& text) {
  std::vector<std::string> records(1);
  bool quoted = false;
  for (const char ch : text) {
    if (ch == '"') quoted = !quoted;
    if (ch == '\n' && !quoted) records.emplace_back();
    else records.back() += ch;
  }
  if (records.back().empty()) records.pop_back();
  return records;
}

TEST(BenchReport, JsonIsWhatTheCalibrationReads) {
  std::ostringstream out;
  write_json(out, sample_info(), sample_rows());
  const model::BenchFile file = model::parse_bench_json(out.str());
  EXPECT_EQ(file.device, "NVIDIA H200");
  EXPECT_EQ(file.commit, "abc1234");
  EXPECT_EQ(file.sms, 132);
  ASSERT_EQ(file.backward.size(), 1u);  // the failed row is not "ok"
  EXPECT_EQ(file.backward[0].schedule, ScheduleKind::kShift);
  EXPECT_EQ(file.backward[0].seqlen, 1024);
  EXPECT_EQ(file.backward[0].head_dim, 128);
  EXPECT_TRUE(file.backward[0].causal);
  EXPECT_DOUBLE_EQ(file.backward[0].median_ms, 0.8);
}

TEST(BenchReport, JsonRecordsProvenanceAndCeiling) {
  std::ostringstream out;
  write_json(out, sample_info(), sample_rows());
  const std::string json = out.str();
  for (const char* field : {"\"date_utc\": \"2026-11-30T08:15:00Z\"", "\"driver_version\": \"580.65.06\"",
                            "\"cuda_runtime\": 13000", "\"sm_clock_mhz\": 1980", "\"wgmma_ceiling_tflops\": 800",
                            "\"ceiling_pct\": 50,", "\"ceiling_pct\": 37.5,", "\"heads_kv\": 16",
                            "\"command\": \"dash-bench --grid quick --json \\\"out.json\\\"\"",
                            "\"status\": \"bad \\\"thing\\\",\\nhappened\"", "\"repro\": \"dash-bench --shape"})
    EXPECT_NE(json.find(field), std::string::npos) << field;

  RunInfo no_ceiling = sample_info();
  no_ceiling.ceiling_tflops = 0;
  std::ostringstream plain;
  write_json(plain, no_ceiling, sample_rows());
  EXPECT_NE(plain.str().find("\"wgmma_ceiling_tflops\": null"), std::string::npos);
  EXPECT_NE(plain.str().find("\"ceiling_pct\": null"), std::string::npos);
}

TEST(BenchReport, CsvHasOneFieldPerColumn) {
  std::ostringstream out;
  write_csv(out, sample_info(), sample_rows());
  const std::vector<std::string> records = csv_records(out.str());
  ASSERT_EQ(records.size(), 4u);  // header + 3 rows
  const std::vector<std::string> header = csv_fields(records[0]);
  const auto column = [&](const std::string& name) {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    ADD_FAILURE() << "no column " << name;
    return std::size_t{0};
  };
  for (std::size_t r = 1; r < records.size(); ++r) ASSERT_EQ(csv_fields(records[r]).size(), header.size()) << records[r];
  const std::vector<std::string> bwd = csv_fields(records[2]);
  EXPECT_EQ(bwd[column("schedule")], "shift");
  EXPECT_EQ(bwd[column("heads_q")], "16");
  EXPECT_EQ(bwd[column("ceiling_pct")], "37.5");
  EXPECT_EQ(bwd[column("verified_on")], "reduced 1,1024,1024,2,2,128");
  EXPECT_EQ(bwd[column("repro")], sample_rows()[1].repro);
  EXPECT_EQ(bwd[column("gpu")], "NVIDIA H200");
  EXPECT_EQ(bwd[column("cuda_driver")], "13.0");
  EXPECT_EQ(bwd[column("date_utc")], "2026-11-30T08:15:00Z");
  const std::vector<std::string> failed = csv_fields(records[3]);
  EXPECT_EQ(failed[column("status")], "bad \"thing\",\nhappened");
  EXPECT_EQ(failed[column("max_error")], "");
}

TEST(BenchReport, TableShowsCeilingShareAndRepro) {
  const std::vector<Row> rows = sample_rows();
  const std::string line = table_row(rows[1], 800);
  EXPECT_NE(line.find(" 37.5 "), std::string::npos) << line;
  EXPECT_NE(line.find("yes/reduced"), std::string::npos) << line;
  EXPECT_NE(line.find("10/10"), std::string::npos) << line;
  EXPECT_NE(line.find("\n    repro: " + rows[1].repro + "\n"), std::string::npos) << line;
  EXPECT_EQ(table_row(rows[1], 0).find(" 37.5 "), std::string::npos);
  EXPECT_NE(table_header().find("%ceil"), std::string::npos);
}

TEST(BenchReport, FailuresAreWrongResultsOrDifferingReruns) {
  Row r;
  EXPECT_FALSE(row_failed(r));
  r.verified = "NO";
  EXPECT_TRUE(row_failed(r));
  r.verified = "error";
  EXPECT_TRUE(row_failed(r));
  r.verified = "yes", r.bitwise = "9/10";
  EXPECT_TRUE(row_failed(r));
  r.bitwise = "10/10";
  EXPECT_FALSE(row_failed(r));
}

TEST(BenchReport, Formatting) {
  EXPECT_EQ(utc_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(cuda_version_text(12080), "12.8");
  EXPECT_EQ(cuda_version_text(0), "unknown");
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(json_escape("a\"b\\c\n"), "a\\\"b\\\\c\\n");
  EXPECT_TRUE(std::isnan(ceiling_percent(100, 0)));
  EXPECT_DOUBLE_EQ(ceiling_percent(200, 800), 25);
}

TEST(BenchModelRows, EveryScheduleIsModeled) {
  BenchOptions o;
  const BenchCase c{ProblemShape{2, 512, 512, 4, 2, 128}, true};
  const std::vector<Row> rows = model_rows(o, c, 2);
  ASSERT_EQ(rows.size(), o.schedules.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].impl, "model");
    EXPECT_EQ(rows[i].schedule, to_string(o.schedules[i]));
    EXPECT_EQ(rows[i].deterministic, o.schedules[i] != ScheduleKind::kAtomic);
    EXPECT_EQ(rows[i].status, "modeled");
    EXPECT_GT(rows[i].median_ms, 0);
    EXPECT_GT(rows[i].tflops, 0);
    EXPECT_NE(rows[i].repro.find("--shape 2,512,512,4,2,128 --masks causal --passes bwd"), std::string::npos);
  }
  bool calibrated = false;
  h200_backward_costs(256, &calibrated);
  EXPECT_TRUE(calibrated);
  h200_backward_costs(96, &calibrated);
  EXPECT_FALSE(calibrated);
}

}  // namespace
}  // namespace dash_attn::bench
