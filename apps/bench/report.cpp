#include "bench/report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "bench/options.hpp"

namespace dash_attn::bench {
namespace {

// Six significant digits, as std::ostream prints; JSON has no inf or nan.
std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string quoted(const std::string& text) { return "\"" + json_escape(text) + "\""; }

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

double ceiling_percent(double tflops, double ceiling_tflops) {
  return ceiling_tflops > 0 ? 100.0 * tflops / ceiling_tflops : NAN;
}

bool row_failed(const Row& row) {
  if (row.verified == "NO" || row.verified == "error") return true;
  const std::size_t slash = row.bitwise.find('/');
  return slash != std::string::npos && row.bitwise.substr(0, slash) != row.bitwise.substr(slash + 1);
}

std::string utc_timestamp(std::time_t time) {
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string cuda_version_text(int version) {
  if (version <= 0) return "unknown";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string table_header() {
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %-4s %-15s %-3s %-24s %-6s %9s %7s %6s %9s %-11s %-7s %s\n", "impl", "pass",
                "schedule", "det", "shape b,sq,sk,hq,hkv,d", "mask", "ms", "TFLOPS", "%ceil", "max_err", "verified",
                "bitwise", "status");
  return line;
}

std::string table_row(const Row& r, double ceiling_tflops) {
  const double percent = ceiling_percent(r.tflops, ceiling_tflops);
  char pct[16] = "-", error[16] = "-";
  if (std::isfinite(percent) && r.tflops > 0) std::snprintf(pct, sizeof pct, "%.1f", percent);
  if (r.max_error >= 0) std::snprintf(error, sizeof error, "%.2e", r.max_error);
  std::string verified = r.verified;
  if (r.verified_on != "-") verified += "/" + r.verified_on.substr(0, r.verified_on.find_first_of(" :"));
  const std::string status = r.verified == "error" ? r.status + " (check failed: " + r.verified_on + ")" : r.status;
  char line[512];
  std::snprintf(line, sizeof line, "%-9s %-4s %-15s %-3s %-24s %-6s %9.3f %7.1f %6s %9s %-11s %-7s ", r.impl.c_str(),
                r.pass.c_str(), r.schedule.c_str(), r.pass == "fwd" ? "-" : (r.deterministic ? "yes" : "no"),
                shape_text(r.shape).c_str(), r.mask.c_str(), r.median_ms, r.tflops, pct, error, verified.c_str(),
                r.bitwise.c_str());
  std::string text = line + status + "\n";
  if (!r.repro.empty()) text += "    repro: " + r.repro + "\n";
  return text;
}

void write_json(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows) {
  out << "{\n  \"mode\": " << quoted(info.mode) << ",\n  \"commit\": " << quoted(info.commit)
      << ",\n  \"date_utc\": " << quoted(info.date_utc) << ",\n  \"command\": " << quoted(info.command)
      << ",\n  \"device\": " << quoted(info.gpu) << ",\n  \"sms\": " << info.sms
      << ",\n  \"sm_clock_mhz\": " << info.sm_clock_mhz << ",\n  \"driver_version\": " << quoted(info.driver_version)
      << ",\n  \"cuda_driver\": " << info.cuda_driver << ",\n  \"cuda_runtime\": " << info.cuda_runtime
      << ",\n  \"dtype\": " << quoted(std::string(to_string(info.dtype))) << ",\n  \"repetitions\": " << info.repetitions
      << ",\n  \"determinism_runs\": " << info.determinism_runs
      << ",\n  \"wgmma_ceiling_tflops\": " << number(info.ceiling_tflops > 0 ? info.ceiling_tflops : NAN)
      << ",\n  \"wgmma_ceiling_kernel\": " << quoted(info.ceiling_kernel) << ",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const ProblemShape& s = r.shape;
    out << "    {\"impl\": " << quoted(r.impl) << ", \"pass\": " << quoted(r.pass) << ", \"schedule\": " << quoted(r.schedule)
        << ", \"deterministic\": " << (r.deterministic ? "true" : "false") << ", \"batch\": " << s.batch
        << ", \"seqlen_q\": " << s.seqlen_q << ", \"seqlen_k\": " << s.seqlen_k << ", \"heads_q\": " << s.heads_q
        << ", \"heads_kv\": " << s.heads_kv << ", \"head_dim\": " << s.head_dim << ", \"mask\": " << quoted(r.mask)
        << ", \"seqlen\": " << s.seqlen_q << ", \"median_ms\": " << number(r.median_ms)
        << ", \"min_ms\": " << number(r.min_ms) << ", \"max_ms\": " << number(r.max_ms)
        << ", \"tflops\": " << number(r.tflops)
        << ", \"ceiling_pct\": " << number(ceiling_percent(r.tflops, info.ceiling_tflops))
        << ", \"max_error\": " << number(r.max_error) << ", \"verified\": " << quoted(r.verified)
        << ", \"verified_on\": " << quoted(r.verified_on) << ", \"bitwise\": " << quoted(r.bitwise)
        << ", \"status\": " << quoted(r.status) << ", \"repro\": " << quoted(r.repro) << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

void write_csv(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows) {
  out << "impl,pass,schedule,deterministic,batch,seqlen_q,seqlen_k,heads_q,heads_kv,head_dim,mask,dtype,median_ms,"
         "min_ms,max_ms,tflops,ceiling_pct,max_error,verified,verified_on,bitwise,status,repro,mode,commit,date_utc,"
         "gpu,driver_version,cuda_runtime,cuda_driver,sms,sm_clock_mhz,wgmma_ceiling_tflops\n";
  const auto blank_null = [](double value) { return std::isfinite(value) ? number(value) : std::string(); };
  for (const Row& r : rows) {
    out << csv_field(r.impl) << ',' << r.pass << ',' << r.schedule << ',' << (r.deterministic ? "true" : "false") << ','
        << shape_text(r.shape) << ',' << r.mask << ',' << to_string(info.dtype) << ',' << blank_null(r.median_ms) << ','
        << blank_null(r.min_ms) << ',' << blank_null(r.max_ms) << ',' << blank_null(r.tflops) << ','
        << blank_null(ceiling_percent(r.tflops, info.ceiling_tflops)) << ','
        << (r.max_error >= 0 ? number(r.max_error) : std::string()) << ',' << r.verified << ','
        << csv_field(r.verified_on) << ',' << r.bitwise << ',' << csv_field(r.status) << ',' << csv_field(r.repro) << ','
        << info.mode << ',' << csv_field(info.commit) << ',' << info.date_utc << ',' << csv_field(info.gpu) << ','
        << csv_field(info.driver_version) << ',' << cuda_version_text(info.cuda_runtime) << ','
        << cuda_version_text(info.cuda_driver) << ',' << info.sms << ',' << info.sm_clock_mhz << ','
        << (info.ceiling_tflops > 0 ? number(info.ceiling_tflops) : std::string()) << '\n';
  }
}

void save_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  save(path, [&](std::ostream& out) { write_json(out, info, rows); });
}

void save_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  save(path, [&](std::ostream& out) { write_csv(out, info, rows); });
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (ch == '\n') out += "\\n";
    else if (ch == '\t') out += "\\t";
    else if (static_cast<unsigned char>(ch) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", ch);
      out += code;
    } else out += ch;
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (const char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

}  // namespace dash_attn::bench
