// dash-bench: forward and backward TFLOPS on the standard grid of
// docs/benchmarks.md, each row verified against the fp64 reference on one
// (batch, head) slice and, for deterministic backward rows, checked bitwise
// over reruns. Prints a table and writes JSON.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "attention_naive.hpp"
#include "attention_reference.hpp"
#include "bench/device_problem.hpp"
#include "bench/timing.hpp"
#include "dash_attn/dash_attn.hpp"

namespace dash_attn::bench {
namespace {

struct Config {
  std::vector<int> head_dims{64, 128};
  std::vector<int> seqlens{512, 1024, 2048, 4096, 8192, 16384};
  std::vector<bool> masks{false, true};
  std::vector<ScheduleKind> schedules{ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                                      ScheduleKind::kShift, ScheduleKind::kSymmetricShift, ScheduleKind::kAuto};
  DType dtype = DType::kBF16;
  int total_tokens = 16384;
  int hidden = 2048;
  int repetitions = 30;
  int determinism_runs = 10;
  int verify_max_seqlen = 2048;  // the fp64 slice check costs O(seqlen^2 * head_dim) on one CPU core
  std::string json_path;
  std::string commit = "unknown";
};

struct Row {
  std::string pass, schedule, mask, status;
  int head_dim = 0, seqlen = 0;
  bool deterministic = false;
  double median_ms = 0, min_ms = 0, max_ms = 0, tflops = 0, max_error = -1;
  std::string verified = "-", bitwise = "-";
};

std::vector<int> parse_ints(const std::string& list) {
  std::vector<int> values;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoi(item));
  return values;
}

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "dash-bench: %s\n"
               "usage: dash-bench [--grid standard|quick] [--hdims 64,128] [--seqlens 512,...] [--masks full,causal]\n"
               "                  [--schedules atomic,fa3,descending,shift,symmetric_shift,auto] [--dtype bf16|fp16]\n"
               "                  [--reps N] [--determinism-runs N] [--verify-max-seqlen N (0: no fp64 check)]\n"
               "                  [--json FILE] [--commit SHA]\n",
               problem.c_str());
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--grid") {
      const std::string grid = value();
      if (grid == "quick") c.seqlens = {1024, 4096}, c.head_dims = {128};
      else if (grid != "standard") usage("unknown grid '" + grid + "'");
    } else if (flag == "--hdims") c.head_dims = parse_ints(value());
    else if (flag == "--seqlens") c.seqlens = parse_ints(value());
    else if (flag == "--masks") {
      const std::string m = value();
      c.masks.clear();
      if (m.find("full") != std::string::npos) c.masks.push_back(false);
      if (m.find("causal") != std::string::npos) c.masks.push_back(true);
      if (c.masks.empty()) usage("--masks takes full, causal or full,causal");
    } else if (flag == "--schedules") {
      c.schedules.clear();
      std::stringstream in(value());
      for (std::string name; std::getline(in, name, ',');) {
        const auto kind = parse_schedule_kind(name);
        if (!kind) usage("unknown schedule '" + name + "'");
        c.schedules.push_back(*kind);
      }
    } else if (flag == "--dtype") {
      const std::string d = value();
      if (d == "bf16") c.dtype = DType::kBF16;
      else if (d == "fp16") c.dtype = DType::kFP16;
      else usage("--dtype takes bf16 or fp16");
    } else if (flag == "--reps") c.repetitions = std::stoi(value());
    else if (flag == "--determinism-runs") c.determinism_runs = std::stoi(value());
    else if (flag == "--verify-max-seqlen") c.verify_max_seqlen = std::stoi(value());
    else if (flag == "--json") c.json_path = value();
    else if (flag == "--commit") c.commit = value();
    else usage("unknown flag '" + flag + "'");
  }
  return c;
}

// One (batch 0, head 0) slice of a dense (batch, seq, head, dim) tensor.
std::vector<double> head_slice(const std::vector<double>& values, int64_t seqlen, int64_t heads, int64_t dim) {
  std::vector<double> slice(seqlen * dim);
  for (int64_t s = 0; s < seqlen; ++s)
    for (int64_t d = 0; d < dim; ++d) slice[s * dim + d] = values[(s * heads) * dim + d];
  return slice;
}

double forward_flops(const ProblemShape& s, bool causal) {
  const double full = 4.0 * s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim;
  return causal ? full / 2 : full;
}

// Verification of one (batch, head) slice against fp64 with FA3's rule
// (factor 2 over the naive same-precision error, small atol).
struct SliceCheck {
  double max_error = 0;
  bool ok = true;
};

void accumulate(SliceCheck& check, const std::vector<double>& kernel, const std::vector<double>& naive,
                const std::vector<double>& exact) {
  double kernel_error = 0, naive_error = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    kernel_error = std::isnan(kernel[i]) ? INFINITY : std::max(kernel_error, std::abs(kernel[i] - exact[i]));
    naive_error = std::max(naive_error, std::abs(naive[i] - exact[i]));
  }
  check.max_error = std::max(check.max_error, kernel_error);
  check.ok = check.ok && kernel_error <= 2 * naive_error + 1e-3;
}

struct Slices {
  ProblemShape shape;
  std::vector<double> q, k, v, dout;
};

Slices slices_of(const DeviceProblem& p) {
  const ProblemShape& s = p.shape();
  Slices r{ProblemShape{1, s.seqlen_q, s.seqlen_k, 1, 1, s.head_dim}, {}, {}, {}, {}};
  r.q = head_slice(p.download(p.q(), p.q_elements()), s.seqlen_q, s.heads_q, s.head_dim);
  r.k = head_slice(p.download(p.k(), p.kv_elements()), s.seqlen_k, s.heads_kv, s.head_dim);
  r.v = head_slice(p.download(p.v(), p.kv_elements()), s.seqlen_k, s.heads_kv, s.head_dim);
  r.dout = head_slice(p.download(p.dout(), p.q_elements()), s.seqlen_q, s.heads_q, s.head_dim);
  return r;
}

void print_header() {
  std::printf("%-4s %-16s %-4s %-5s %-7s %6s %9s %8s %9s %-8s %-7s %s\n", "pass", "schedule", "det", "hdim", "mask",
              "seqlen", "ms", "TFLOPS", "max_err", "verified", "bitwise", "status");
}

// Printed as soon as measured, so a run stopped by a time limit still reports what it did.
void print_row(const Row& r) {
  std::printf("%-4s %-16s %-4s %-5d %-7s %6d %9.3f %8.1f %9.2e %-8s %-7s %s\n", r.pass.c_str(), r.schedule.c_str(),
              r.pass == "fwd" ? "-" : (r.deterministic ? "yes" : "no"), r.head_dim, r.mask.c_str(), r.seqlen,
              r.median_ms, r.tflops, r.max_error, r.verified.c_str(), r.bitwise.c_str(), r.status.c_str());
  std::fflush(stdout);
}

void run_config(const Config& c, int head_dim, bool causal, int seqlen, std::vector<Row>& rows) {
  const ProblemShape shape{c.total_tokens / seqlen, seqlen, seqlen, c.hidden / head_dim, c.hidden / head_dim, head_dim};
  DeviceProblem problem(shape, c.dtype, 1000 + seqlen + head_dim + causal);
  Options options;
  options.causal = causal;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const bool verify = seqlen <= c.verify_max_seqlen;
  const Slices slice = verify ? slices_of(problem) : Slices{};
  const auto base_row = [&](const char* pass) {
    Row r;
    r.pass = pass, r.head_dim = head_dim, r.seqlen = seqlen, r.mask = causal ? "causal" : "full";
    return r;
  };

  Row fwd = base_row("fwd");
  fwd.schedule = "-";
  bool have_forward = false;
  try {
    const ForwardArgs args = problem.forward_args();
    const Timing t = time_calls([&] { forward(args, options, nullptr); }, 3, c.repetitions);
    DASH_CUDA_CHECK(cudaDeviceSynchronize());
    fwd.median_ms = t.median_ms, fwd.min_ms = t.min_ms, fwd.max_ms = t.max_ms;
    fwd.tflops = forward_flops(shape, causal) / (t.median_ms * 1e9);
    fwd.status = "ok";
    have_forward = true;
    if (verify) {
      const auto exact = reference::attention_forward(slice.shape, causal, scale, slice.q, slice.k, slice.v);
      const auto naive = reference::naive_forward(c.dtype, slice.shape, causal, scale, slice.q, slice.k, slice.v);
      const auto out = head_slice(problem.download(problem.out(), problem.q_elements()), seqlen, shape.heads_q, head_dim);
      SliceCheck check;
      accumulate(check, out, naive.out, exact.out);
      fwd.max_error = check.max_error;
      fwd.verified = check.ok ? "yes" : "NO";
    }
  } catch (const Error& e) {
    fwd.status = e.code() == ErrorCode::kNotImplemented ? "not implemented" : e.what();
  }
  rows.push_back(fwd);
  print_row(fwd);

  reference::Gradients exact_gradients, naive_gradients;
  for (const ScheduleKind kind : c.schedules) {
    Row bwd = base_row("bwd");
    bwd.schedule = std::string(to_string(kind));
    Options o = options;
    o.schedule = kind;
    o.deterministic = kind != ScheduleKind::kAtomic;
    bwd.deterministic = o.deterministic;
    if (!have_forward) {
      bwd.status = "needs forward";
      rows.push_back(bwd);
      print_row(bwd);
      continue;
    }
    try {
      const BackwardArgs args = problem.backward_args(o);
      const Timing t = time_calls([&] { backward(args, o, nullptr); }, 3, c.repetitions);
      DASH_CUDA_CHECK(cudaDeviceSynchronize());
      bwd.median_ms = t.median_ms, bwd.min_ms = t.min_ms, bwd.max_ms = t.max_ms;
      bwd.tflops = 2.5 * forward_flops(shape, causal) / (t.median_ms * 1e9);
      bwd.status = "ok";
      if (verify) {
        if (exact_gradients.dq.empty()) {  // once per configuration: the fp64 slice costs seconds
          exact_gradients = reference::attention_backward(slice.shape, causal, scale, slice.q, slice.k, slice.v, slice.dout);
          naive_gradients = reference::naive_backward(c.dtype, slice.shape, causal, scale, slice.q, slice.k, slice.v, slice.dout);
        }
        const auto& exact = exact_gradients;
        const auto& naive = naive_gradients;
        SliceCheck check;
        accumulate(check, head_slice(problem.download(problem.dq(), problem.q_elements()), seqlen, shape.heads_q, head_dim), naive.dq, exact.dq);
        accumulate(check, head_slice(problem.download(problem.dk(), problem.kv_elements()), seqlen, shape.heads_kv, head_dim), naive.dk, exact.dk);
        accumulate(check, head_slice(problem.download(problem.dv(), problem.kv_elements()), seqlen, shape.heads_kv, head_dim), naive.dv, exact.dv);
        bwd.max_error = check.max_error;
        bwd.verified = check.ok ? "yes" : "NO";
      }
      if (o.deterministic && c.determinism_runs > 0) {
        const auto bits = [&] {
          return std::vector<std::vector<uint16_t>>{problem.download_bits(problem.dq(), problem.q_elements()),
                                                    problem.download_bits(problem.dk(), problem.kv_elements()),
                                                    problem.download_bits(problem.dv(), problem.kv_elements())};
        };
        const auto first = bits();
        int equal = 0;
        for (int run = 0; run < c.determinism_runs; ++run) {
          backward(args, o, nullptr);
          DASH_CUDA_CHECK(cudaDeviceSynchronize());
          equal += bits() == first;
        }
        bwd.bitwise = std::to_string(equal) + "/" + std::to_string(c.determinism_runs);
      }
    } catch (const Error& e) {
      bwd.status = e.code() == ErrorCode::kNotImplemented ? "not implemented" : e.what();
    }
    rows.push_back(bwd);
    print_row(bwd);
  }
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) out += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  return out;
}

void write_json(const Config& c, const std::vector<Row>& rows) {
  cudaDeviceProp prop{};
  DASH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::ofstream out(c.json_path);
  out << "{\n  \"commit\": \"" << json_escape(c.commit) << "\",\n  \"device\": \"" << json_escape(prop.name)
      << "\",\n  \"sms\": " << prop.multiProcessorCount << ",\n  \"cuda_driver\": " << driver
      << ",\n  \"cuda_runtime\": " << runtime << ",\n  \"dtype\": \"" << to_string(c.dtype)
      << "\",\n  \"repetitions\": " << c.repetitions << ",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << "    {\"impl\": \"dash_attn\", \"pass\": \"" << r.pass << "\", \"schedule\": \"" << r.schedule
        << "\", \"deterministic\": " << (r.deterministic ? "true" : "false") << ", \"head_dim\": " << r.head_dim
        << ", \"mask\": \"" << r.mask << "\", \"seqlen\": " << r.seqlen << ", \"median_ms\": " << r.median_ms
        << ", \"min_ms\": " << r.min_ms << ", \"max_ms\": " << r.max_ms << ", \"tflops\": " << r.tflops
        << ", \"max_error\": " << r.max_error << ", \"verified\": \"" << r.verified << "\", \"bitwise\": \""
        << r.bitwise << "\", \"status\": \"" << json_escape(r.status) << "\"}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

}  // namespace
}  // namespace dash_attn::bench

int main(int argc, char** argv) {
  using namespace dash_attn::bench;
  const Config config = parse(argc, argv);
  std::vector<Row> rows;
  print_header();
  try {
    for (const int head_dim : config.head_dims)
      for (const bool causal : config.masks)
        for (const int seqlen : config.seqlens) {
          run_config(config, head_dim, causal, seqlen, rows);
          if (!config.json_path.empty()) write_json(config, rows);  // rewritten each time: partial runs keep results
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dash-bench: %s\n", e.what());
    return 1;
  }
  for (const Row& r : rows)
    if (r.verified == "NO" || (r.bitwise != "-" && r.bitwise.substr(0, r.bitwise.find('/')) != r.bitwise.substr(r.bitwise.find('/') + 1)))
      return 1;
  return 0;
}
