#include "bench/report.hpp"

#include <cmath>
#include <cstdio>

#include "bench/options.hpp"

namespace dash_attn::bench {

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

std::string progress_line(std::size_t number, std::size_t total, const BenchCase& c) {
  return "[" + std::to_string(number) + "/" + std::to_string(total) + "] " + shape_text(c.shape) + " " +
         (c.causal ? "causal" : "full") + "\n";
}

}  // namespace dash_attn::bench
