// dash-bench's results (apps/bench): the JSON it writes is what
// dash-model --calibrate reads, the CSV has one field per header column with
// quoting where a field needs it, JSON and CSV carry the same value in every
// field (null / empty where unknown), the table shows the ceiling share and a
// repro line, and the no-GPU fallback models every schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/model_rows.hpp"
#include "bench/options.hpp"
#include "bench/report.hpp"
#include "bench/result_files.hpp"
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

using Json = nlohmann::json;

Json json_of(const RunInfo& info, const std::vector<Row>& rows) {
  std::ostringstream out;
  write_json(out, info, rows);
  return Json::parse(out.str());
}

// The CSV as one map per row: column name -> field.
std::vector<std::map<std::string, std::string>> csv_of(const RunInfo& info, const std::vector<Row>& rows) {
  std::ostringstream out;
  write_csv(out, info, rows);
  const std::vector<std::string> records = csv_records(out.str());
  const std::vector<std::string> header = csv_fields(records.at(0));
  std::vector<std::map<std::string, std::string>> table;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const std::vector<std::string> fields = csv_fields(records[r]);
    if (fields.size() != header.size()) throw std::runtime_error("fields != columns in: " + records[r]);
    auto& row = table.emplace_back();
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
  }
  return table;
}

// What a JSON value reads as in the CSV: strings as they are, null empty,
// numbers and booleans as JSON spells them.
std::string as_csv(const Json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// A run where nothing about the device is known: the model fallback on a machine without a GPU.
RunInfo unknown_info() {
  RunInfo info;
  info.mode = "model";
  info.date_utc = "2026-11-30T08:15:00Z";
  info.command = "dash-bench --model";
  return info;
}

TEST(BenchReport, JsonRecordsProvenanceAndCeiling) {
  const Json json = json_of(sample_info(), sample_rows());
  EXPECT_EQ(json["date_utc"], "2026-11-30T08:15:00Z");
  EXPECT_EQ(json["driver_version"], "580.65.06");
  EXPECT_EQ(json["cuda_runtime"], "13.0");
  EXPECT_EQ(json["cuda_driver"], "13.0");
  EXPECT_EQ(json["sm_clock_mhz"], 1980);
  EXPECT_EQ(json["wgmma_ceiling_tflops"], 800);
  EXPECT_EQ(json["command"], "dash-bench --grid quick --json \"out.json\"");
  const Json& rows = json["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["ceiling_pct"], 50);
  EXPECT_EQ(rows[1]["ceiling_pct"], 37.5);
  EXPECT_EQ(rows[1]["heads_kv"], 16);
  EXPECT_EQ(rows[2]["status"], "bad \"thing\",\nhappened");
  EXPECT_EQ(rows[1]["repro"], sample_rows()[1].repro);

  RunInfo no_ceiling = sample_info();
  no_ceiling.ceiling_tflops = 0;
  const Json plain = json_of(no_ceiling, sample_rows());
  EXPECT_TRUE(plain["wgmma_ceiling_tflops"].is_null());
  EXPECT_TRUE(plain["rows"][0]["ceiling_pct"].is_null());
}

TEST(BenchReport, JsonHasOneRowPerLine) {
  std::ostringstream out;
  write_json(out, sample_info(), sample_rows());
  std::istringstream in(out.str());
  int row_lines = 0;
  for (std::string line; std::getline(in, line);) row_lines += line.rfind("    {\"impl\":", 0) == 0;
  EXPECT_EQ(row_lines, 3);
  std::ostringstream empty;
  write_json(empty, sample_info(), {});
  EXPECT_TRUE(Json::parse(empty.str())["rows"].empty());
}

TEST(BenchReport, UnknownValuesAreNullInJsonAndEmptyInCsv) {
  std::vector<Row> rows = sample_rows();
  rows[2].median_ms = rows[2].min_ms = rows[2].max_ms = rows[2].tflops = 0;  // the failed row was not timed
  const Json json = json_of(unknown_info(), rows);
  const auto csv = csv_of(unknown_info(), rows);
  for (const char* key : {"commit", "device", "sms", "sm_clock_mhz", "driver_version", "cuda_runtime", "cuda_driver",
                          "wgmma_ceiling_tflops", "wgmma_ceiling_kernel"}) {
    EXPECT_TRUE(json[key].is_null()) << key << ": " << json[key];
    EXPECT_EQ(csv[0].at(key), "") << key;
  }
  for (const char* key : {"median_ms", "min_ms", "max_ms", "tflops", "ceiling_pct", "max_error"}) {
    EXPECT_TRUE(json["rows"][2][key].is_null()) << key << ": " << json["rows"][2][key];
    EXPECT_EQ(csv[2].at(key), "") << key;
  }
  EXPECT_EQ(json["mode"], "model");
  EXPECT_EQ(json["rows"][1]["max_error"], 1.5e-3);
}

TEST(BenchReport, JsonAndCsvCarryTheSameValues) {
  for (const RunInfo& info : {sample_info(), unknown_info()}) {
    std::vector<Row> rows = sample_rows();
    rows[0].tflops = 123.456789, rows[0].median_ms = 0.000123456789;  // rounded alike in both
    const Json json = json_of(info, rows);
    const auto csv = csv_of(info, rows);
    ASSERT_EQ(csv.size(), rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const Json& row = json["rows"][r];
      std::size_t columns = 0;
      for (const auto& [key, value] : row.items()) {
        EXPECT_EQ(csv[r].at(key), as_csv(value)) << "row " << r << " " << key;
        ++columns;
      }
      for (const auto& [key, value] : json.items()) {
        if (key == "rows") continue;
        EXPECT_EQ(csv[r].at(key), as_csv(value)) << "row " << r << " " << key;
        ++columns;
      }
      EXPECT_EQ(columns, csv[r].size()) << "the CSV has exactly the JSON's fields";
    }
  }
  const Json json = json_of(sample_info(), sample_rows());
  EXPECT_EQ(csv_of(sample_info(), sample_rows())[1].at("cuda_runtime"), "13.0");
  EXPECT_EQ(json["cuda_runtime"], "13.0");
}

TEST(BenchReport, NumbersKeepSixSignificantDigits) {
  std::vector<Row> rows = sample_rows();
  rows[0].tflops = 123.456789;
  const Json json = json_of(sample_info(), rows);
  EXPECT_EQ(json["rows"][0]["tflops"].dump(), "123.457");
  EXPECT_EQ(csv_of(sample_info(), rows)[0].at("tflops"), "123.457");
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
  EXPECT_EQ(bwd[column("device")], "NVIDIA H200");
  EXPECT_EQ(bwd[column("cuda_driver")], "13.0");
  EXPECT_EQ(bwd[column("date_utc")], "2026-11-30T08:15:00Z");
  EXPECT_EQ(bwd[column("command")], "dash-bench --grid quick --json \"out.json\"");
  const std::vector<std::string> failed = csv_fields(records[3]);
  EXPECT_EQ(failed[column("status")], "bad \"thing\",\nhappened");
  EXPECT_EQ(failed[column("max_error")], "");
}

TEST(BenchReport, CalibrationReaderNamesTheLineOfABadRow) {
  std::ostringstream out;
  write_json(out, sample_info(), sample_rows());
  std::string text = out.str();
  text.replace(text.find("\"schedule\":\"shift\""), 18, "\"schedule\":\"spiral\"");
  std::istringstream in(text);
  int line = 0, bad_line = 0;
  for (std::string l; std::getline(in, l);)
    if (++line, l.find("spiral") != std::string::npos) bad_line = line;
  try {
    model::parse_bench_json(text);
    ADD_FAILURE() << "accepted an unknown schedule";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "line " + std::to_string(bad_line) + ": unknown schedule 'spiral'");
  }
}

TEST(BenchReport, ProgressLineCountsCases) {
  EXPECT_EQ(progress_line(3, 24, BenchCase{ProblemShape{4, 4096, 4096, 16, 16, 128}, true}),
            "[3/24] 4,4096,4096,16,16,128 causal\n");
  EXPECT_EQ(progress_line(1, 1, BenchCase{ProblemShape{1, 512, 512, 2, 1, 64}, false}), "[1/1] 1,512,512,2,1,64 full\n");
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
