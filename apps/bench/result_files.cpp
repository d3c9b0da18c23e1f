#include "bench/result_files.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>

namespace dash_attn::bench {
namespace {

using Json = nlohmann::ordered_json;  // fields in the order written below

// Six significant digits, as the table prints and the files always had: the
// timing noise is larger. Null where not known.
Json measured(double value, bool known) {
  if (!known || !std::isfinite(value)) return nullptr;
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return std::strtod(text, nullptr);
}

Json known_text(const std::string& text, const std::string& unknown) {
  return text.empty() || text == unknown ? Json(nullptr) : Json(text);
}

Json positive(int value) { return value > 0 ? Json(value) : Json(nullptr); }

// "13.0", as the console prints it; the integer form (13000) reads as a count.
Json cuda_version(int version) { return version > 0 ? Json(cuda_version_text(version)) : Json(nullptr); }

Json run_fields(const RunInfo& info) {
  Json j;
  j["mode"] = info.mode;
  j["commit"] = known_text(info.commit, "unknown");
  j["date_utc"] = known_text(info.date_utc, "");
  j["command"] = known_text(info.command, "");
  j["device"] = known_text(info.gpu, "none");
  j["sms"] = positive(info.sms);
  j["sm_clock_mhz"] = positive(info.sm_clock_mhz);
  j["driver_version"] = known_text(info.driver_version, "unknown");
  j["cuda_driver"] = cuda_version(info.cuda_driver);
  j["cuda_runtime"] = cuda_version(info.cuda_runtime);
  j["dtype"] = std::string(to_string(info.dtype));
  j["repetitions"] = info.repetitions;
  j["determinism_runs"] = info.determinism_runs;
  j["wgmma_ceiling_tflops"] = measured(info.ceiling_tflops, info.ceiling_tflops > 0);
  j["wgmma_ceiling_kernel"] = known_text(info.ceiling_kernel, "");
  return j;
}

Json row_fields(const Row& r, const RunInfo& info) {
  const bool timed = r.median_ms > 0;
  Json j;
  j["impl"] = r.impl;
  j["pass"] = r.pass;
  j["schedule"] = r.schedule;
  j["deterministic"] = r.deterministic;
  j["batch"] = r.shape.batch;
  j["seqlen_q"] = r.shape.seqlen_q;
  j["seqlen_k"] = r.shape.seqlen_k;
  j["heads_q"] = r.shape.heads_q;
  j["heads_kv"] = r.shape.heads_kv;
  j["head_dim"] = r.shape.head_dim;
  j["mask"] = r.mask;
  j["seqlen"] = r.shape.seqlen_q;  // the grid's one seqlen, as bench/*.py index rows
  j["median_ms"] = measured(r.median_ms, timed);
  j["min_ms"] = measured(r.min_ms, timed);
  j["max_ms"] = measured(r.max_ms, timed);
  j["tflops"] = measured(r.tflops, timed);
  j["ceiling_pct"] = measured(ceiling_percent(r.tflops, info.ceiling_tflops), timed);
  j["max_error"] = measured(r.max_error, r.max_error >= 0);
  j["verified"] = r.verified;
  j["verified_on"] = r.verified_on;
  j["bitwise"] = r.bitwise;
  j["status"] = r.status;
  j["repro"] = known_text(r.repro, "");
  return j;
}

// Compact JSON text; bytes that are not UTF-8 (a driver's error message)
// become U+FFFD instead of an exception.
std::string text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The CSV field of a value: strings as they are, null empty, numbers and
// booleans as the JSON spells them.
std::string csv_value(const Json& j) {
  if (j.is_null()) return "";
  return csv_field(j.is_string() ? j.get<std::string>() : text(j));
}

// A CSV line's values: the row's fields, then the run's (repeated on every line).
Json csv_record(const Row& r, const RunInfo& info) {
  Json record = row_fields(r, info);
  const Json run = run_fields(info);
  for (const auto& [key, value] : run.items()) record[key] = value;
  return record;
}

void save(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    if (!out) throw std::runtime_error("cannot write '" + temporary + "'");
    write(out);
    if (!out.flush()) throw std::runtime_error("cannot write '" + temporary + "'");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename '" + temporary + "' to '" + path + "'");
}

}  // namespace

void write_json(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows) {
  // One run field and one row per line: the file diffs and greps by row.
  const Json run = run_fields(info);
  out << "{\n";
  for (const auto& [key, value] : run.items()) out << "  " << text(key) << ": " << text(value) << ",\n";
  out << "  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << text(row_fields(rows[i], info));
  out << (rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

void write_csv(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows) {
  const Json columns = csv_record(Row{}, info);
  const char* separator = "";
  for (const auto& [key, value] : columns.items()) out << separator << key, separator = ",";
  out << '\n';
  for (const Row& r : rows) {
    const Json record = csv_record(r, info);
    separator = "";
    for (const auto& [key, value] : record.items()) out << separator << csv_value(value), separator = ",";
    out << '\n';
  }
}

void save_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  save(path, [&](std::ostream& out) { write_json(out, info, rows); });
}

void save_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  save(path, [&](std::ostream& out) { write_csv(out, info, rows); });
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (const char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

}  // namespace dash_attn::bench
