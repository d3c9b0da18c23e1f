#include "bench/options.hpp"

#include "cli_values.hpp"

#include <set>
#include <sstream>

namespace dash_attn::bench {
namespace {

constexpr const char* kUsage = R"(usage: dash-bench [options]
Forward and backward of dash_attn: median time, TFLOPS, the share of the
measured wgmma ceiling, fp64 verification and bitwise reruns of every
deterministic backward. Without an sm_90 GPU it runs the schedule model.

what to run (default: the standard grid of docs/benchmarks.md):
  --grid standard|quick   standard: hdim 64,128 x seqlen 512..16k; quick: hdim 128, seqlen 1k,4k
  --hdims 64,128          head dims of the grid
  --seqlens 512,1024,...  seqlens of the grid (batch = 16384 / seqlen, heads = 2048 / head_dim)
  --shape B,SQ,SK,HQ,HKV,D  one problem instead of the grid (repeatable; HKV < HQ: GQA/MQA)
  --masks full,causal     masks
  --schedules a,b,..      backward schedules: atomic,fa3,descending,shift,symmetric_shift,auto
  --passes fwd,bwd        passes to time (bwd alone still runs one untimed forward)
  --dtype bf16|fp16
how:
  --reps N                timed repetitions, median reported (30)
  --determinism-runs N    bitwise reruns of each deterministic backward (10; 0: none)
  --verify-max-seqlen N   fp64 check of rows with seqlens <= N on a slice of the timed
                          problem (2048; 0: none)
  --verify                check every row: larger ones on a reduced problem (seqlen <= 1024,
                          same head_dim, GQA ratio, mask and schedule)
  --model                 run the schedule model instead of the GPU
output:
  --json FILE, --csv FILE results with commit, GPU, driver, CUDA versions, date, ceiling
  --commit SHA            commit recorded in the results (unknown)
  --help
)";

int parse_int(const std::string& flag, const std::string& text, int min) {
  const std::optional<int> value = cli::parse_int(text, min);
  if (!value) throw UsageError(flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return *value;
}

std::vector<std::string> split(const std::string& text) { return cli::split_commas(text); }

std::vector<int> parse_ints(const std::string& flag, const std::string& text, int min) {
  std::vector<int> values;
  for (const std::string& part : split(text)) values.push_back(parse_int(flag, part, min));
  if (values.empty()) throw UsageError(flag + " expects a comma-separated list of integers");
  return values;
}

ProblemShape parse_shape(const std::string& text) {
  const std::vector<int> v = parse_ints("--shape", text, 1);
  if (v.size() != 6)
    throw UsageError("--shape expects batch,seqlen_q,seqlen_k,heads_q,heads_kv,head_dim, got '" + text + "'");
  const ProblemShape s{v[0], v[1], v[2], v[3], v[4], v[5]};
  if (s.heads_q % s.heads_kv != 0)
    throw UsageError("--shape: heads_kv (" + std::to_string(s.heads_kv) + ") must divide heads_q (" +
                     std::to_string(s.heads_q) + ")");
  return s;
}

}  // namespace

BenchOptions parse_options(const std::vector<std::string>& args) {
  BenchOptions o;
  std::set<std::string> given;
  std::vector<int> head_dims, seqlens;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    given.insert(flag);
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      return args[++i];
    };
    if (flag == "--help" || flag == "-h") o.help = true;
    else if (flag == "--grid") {
      const std::string grid = value();
      if (grid == "quick") o.head_dims = {128}, o.seqlens = {1024, 4096};
      else if (grid != "standard") throw UsageError("--grid expects standard or quick, got '" + grid + "'");
    } else if (flag == "--hdims") head_dims = parse_ints(flag, value(), 1);
    else if (flag == "--seqlens") seqlens = parse_ints(flag, value(), 1);
    else if (flag == "--shape") o.shapes.push_back(parse_shape(value()));
    else if (flag == "--masks") {
      o.masks.clear();
      for (const std::string& m : split(value())) {
        if (m != "full" && m != "causal") throw UsageError("--masks expects full, causal or full,causal, got '" + m + "'");
        o.masks.push_back(m == "causal");
      }
      if (o.masks.empty()) throw UsageError("--masks expects full, causal or full,causal");
    } else if (flag == "--schedules") {
      o.schedules.clear();
      for (const std::string& name : split(value())) {
        const auto kind = parse_schedule_kind(name);
        if (!kind)
          throw UsageError("unknown schedule '" + name + "' (atomic, fa3, descending, shift, symmetric_shift, auto)");
        o.schedules.push_back(*kind);
      }
      if (o.schedules.empty()) throw UsageError("--schedules expects at least one schedule");
    } else if (flag == "--passes") {
      o.forward = o.backward = false;
      for (const std::string& p : split(value())) {
        if (p == "fwd") o.forward = true;
        else if (p == "bwd") o.backward = true;
        else throw UsageError("--passes expects fwd, bwd or fwd,bwd, got '" + p + "'");
      }
      if (!o.forward && !o.backward) throw UsageError("--passes expects fwd, bwd or fwd,bwd");
    } else if (flag == "--dtype") {
      const std::string d = value();
      if (d == "bf16") o.dtype = DType::kBF16;
      else if (d == "fp16") o.dtype = DType::kFP16;
      else throw UsageError("--dtype expects bf16 or fp16, got '" + d + "'");
    } else if (flag == "--reps") o.repetitions = parse_int(flag, value(), 1);
    else if (flag == "--determinism-runs") o.determinism_runs = parse_int(flag, value(), 0);
    else if (flag == "--verify-max-seqlen") o.verify_max_seqlen = parse_int(flag, value(), 0);
    else if (flag == "--verify") o.verify = true;
    else if (flag == "--model") o.model = true;
    else if (flag == "--json") o.json_path = value();
    else if (flag == "--csv") o.csv_path = value();
    else if (flag == "--commit") o.commit = value();
    else throw UsageError("unknown option '" + flag + "'");
  }
  if (!o.shapes.empty())
    for (const char* grid_flag : {"--grid", "--hdims", "--seqlens"})
      if (given.count(grid_flag))
        throw UsageError(std::string("--shape replaces the grid; drop ") + grid_flag);
  if (!head_dims.empty()) o.head_dims = head_dims;  // over --grid, whatever the order
  if (!seqlens.empty()) o.seqlens = seqlens;
  for (const int seqlen : o.seqlens)
    if (seqlen > kGridTokens)
      throw UsageError("--seqlens: " + std::to_string(seqlen) + " is above the grid's " + std::to_string(kGridTokens) +
                       " tokens (batch would be 0); use --shape");
  for (const int head_dim : o.head_dims)
    if (head_dim > kGridHidden)
      throw UsageError("--hdims: " + std::to_string(head_dim) + " is above the grid's hidden size " +
                       std::to_string(kGridHidden) + "; use --shape");
  return o;
}

const char* usage_text() { return kUsage; }

std::string shape_text(const ProblemShape& s) {
  std::ostringstream out;
  out << s.batch << ',' << s.seqlen_q << ',' << s.seqlen_k << ',' << s.heads_q << ',' << s.heads_kv << ',' << s.head_dim;
  return out.str();
}

}  // namespace dash_attn::bench
