#include "bench/options.hpp"

#include <cstdio>
#include <sstream>

#include "cli_parse.hpp"

namespace dash_attn::bench {
namespace {

constexpr const char* kDescription = R"(Forward and backward of dash_attn: median time, TFLOPS, the share of the
measured wgmma ceiling, fp64 verification and bitwise reruns of every
deterministic backward. Without an sm_90 GPU it runs the schedule model.
Every option takes its value as --key value or --key=value.
)";


std::vector<std::string> split(const std::string& text) { return cli::split_commas(text); }

std::vector<int> parse_ints(const std::string& flag, const std::string& text, int min) {
  std::vector<int> values;
  for (const std::string& part : split(text)) values.push_back(cli::option_int(flag, part, min));
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

std::vector<bool> parse_masks(const std::string& text) {
  std::vector<bool> masks;
  for (const std::string& m : split(text)) {
    if (m != "full" && m != "causal") throw UsageError("--masks expects full, causal or full,causal, got '" + m + "'");
    masks.push_back(m == "causal");
  }
  if (masks.empty()) throw UsageError("--masks expects full, causal or full,causal");
  return masks;
}

std::vector<ScheduleKind> parse_schedules(const std::string& text) {
  std::vector<ScheduleKind> schedules;
  for (const std::string& name : split(text)) {
    const auto kind = parse_schedule_kind(name);
    if (!kind) throw UsageError("unknown schedule '" + name + "' (atomic, fa3, descending, shift, symmetric_shift, auto)");
    schedules.push_back(*kind);
  }
  if (schedules.empty()) throw UsageError("--schedules expects at least one schedule");
  return schedules;
}

void parse_passes(const std::string& text, BenchOptions& o) {
  o.forward = o.backward = false;
  for (const std::string& p : split(text)) {
    if (p == "fwd") o.forward = true;
    else if (p == "bwd") o.backward = true;
    else throw UsageError("--passes expects fwd, bwd or fwd,bwd, got '" + p + "'");
  }
  if (!o.forward && !o.backward) throw UsageError("--passes expects fwd, bwd or fwd,bwd");
}

DType parse_dtype(const std::string& text) {
  if (text == "bf16") return DType::kBF16;
  if (text == "fp16") return DType::kFP16;
  throw UsageError("--dtype expects bf16 or fp16, got '" + text + "'");
}

// What the grid options asked for; --hdims and --seqlens are applied after
// --grid, whatever the order they came in.
struct GridChoice {
  std::vector<int> head_dims, seqlens;
};

// Every option, its help and what it does to `o`: parse_options and
// usage_text share it, so the help lists exactly what parses.
void define_options(CLI::App& app, BenchOptions& o, GridChoice& grid) {
  cli::configure(app);
  const std::string run = "what to run (default: the standard grid of docs/benchmarks.md)", how = "how",
                    output = "output";
  cli::add_value(app, "--grid", "standard|quick", [&](const std::string& v) {
    if (v == "quick") o.head_dims = {128}, o.seqlens = {1024, 4096};
    else if (v != "standard") throw UsageError("--grid expects standard or quick, got '" + v + "'");
  }, "standard: hdim 64,128 x seqlen 512..16k; quick: hdim 128, seqlen 1k,4k")->group(run);
  cli::add_value(app, "--hdims", "64,128", [&](const std::string& v) { grid.head_dims = parse_ints("--hdims", v, 1); },
                 "head dims of the grid")->group(run);
  cli::add_value(app, "--seqlens", "512,1024,...", [&](const std::string& v) { grid.seqlens = parse_ints("--seqlens", v, 1); },
                 "seqlens of the grid (batch = 16384 / seqlen, heads = 2048 / head_dim)")->group(run);
  cli::add_repeated(app, "--shape", "B,SQ,SK,HQ,HKV,D", [&](const std::vector<std::string>& values) {
    for (const std::string& v : values) o.shapes.push_back(parse_shape(v));
  }, "one problem instead of the grid (repeatable; HKV < HQ: GQA/MQA)")->group(run);
  cli::add_value(app, "--masks", "full,causal", [&](const std::string& v) { o.masks = parse_masks(v); }, "masks")->group(run);
  cli::add_value(app, "--schedules", "a,b,..", [&](const std::string& v) { o.schedules = parse_schedules(v); },
                 "backward schedules: atomic,fa3,descending,shift,symmetric_shift,auto")->group(run);
  cli::add_value(app, "--passes", "fwd,bwd", [&](const std::string& v) { parse_passes(v, o); },
                 "passes to time (bwd alone still runs one untimed forward)")->group(run);
  cli::add_value(app, "--window", "L,R", [&](const std::string& v) {
    const std::vector<int> sides = parse_ints("--window", v, -1);
    if (sides.size() != 2) throw UsageError("--window expects L,R (two ints >= -1), got '" + v + "'");
    o.mods.window_left = sides[0], o.mods.window_right = sides[1];
  }, "sliding window (FlashAttention's window_size; -1 unbounded; TFLOPS count the band)")->group(run);
  cli::add_value(app, "--softcap", "X", [&](const std::string& v) {
    o.mods.softcap = cli::option_double("--softcap", v, 0.0);
  }, "scores become X * tanh(s / X) (0: off)")->group(run);
  cli::add_value(app, "--q-heads-per-chain", "N", [&](const std::string& v) {
    o.q_heads_per_chain = cli::option_int("--q-heads-per-chain", v, 0);
  }, "GQA backward: q-heads each chain walks (a divisor of the group; 0: the library's choice)")->group(run);
  cli::add_value(app, "--dtype", "bf16|fp16", [&](const std::string& v) { o.dtype = parse_dtype(v); },
                 "element type of q, k, v and the gradients (bf16)")->group(run);

  cli::add_value(app, "--reps", "N", [&](const std::string& v) { o.repetitions = cli::option_int("--reps", v, 1); },
                 "timed repetitions, median reported (30)")->group(how);
  cli::add_value(app, "--settle-ms", "MS", [&](const std::string& v) { o.settle_ms = cli::option_int("--settle-ms", v, 0); },
                 "idle milliseconds before each row's timed calls, so that every row starts at the same clock (500)")
      ->group(how);
  cli::add_value(app, "--determinism-runs", "N",
                 [&](const std::string& v) { o.determinism_runs = cli::option_int("--determinism-runs", v, 0); },
                 "bitwise reruns of each deterministic backward (10; 0: none)")->group(how);
  cli::add_value(app, "--verify-max-seqlen", "N",
                 [&](const std::string& v) { o.verify_max_seqlen = cli::option_int("--verify-max-seqlen", v, 0); },
                 "fp64 check of rows with seqlens <= N on a slice of the timed problem (2048; 0: none)")->group(how);
  app.add_flag("--verify", o.verify,
               "check every row: larger ones on a reduced problem (seqlen <= 1024, same head_dim, GQA ratio, mask "
               "and schedule)")->group(how);
  app.add_flag("--model", o.model, "run the schedule model instead of the GPU")->group(how);

  cli::add_value(app, "--json", "FILE", [&](const std::string& v) { o.json_path = v; },
                 "results with commit, GPU, driver, CUDA versions, date, ceiling")->group(output);
  cli::add_value(app, "--csv", "FILE", [&](const std::string& v) { o.csv_path = v; },
                 "the same results, one line per row")->group(output);
  cli::add_value(app, "--commit", "SHA", [&](const std::string& v) { o.commit = v; },
                 "commit recorded in the results (unknown)")->group(output);
  app.add_flag("-h,--help", o.help, "this help")->group(output);
}

}  // namespace

BenchOptions parse_options(const std::vector<std::string>& args) {
  BenchOptions o;
  GridChoice grid;
  CLI::App app(kDescription, "dash-bench");
  define_options(app, o, grid);
  cli::parse(app, args);
  if (!o.shapes.empty())
    for (const char* grid_flag : {"--grid", "--hdims", "--seqlens"})
      if (cli::given(app, grid_flag)) throw UsageError(std::string("--shape replaces the grid; drop ") + grid_flag);
  if (!grid.head_dims.empty()) o.head_dims = grid.head_dims;
  if (!grid.seqlens.empty()) o.seqlens = grid.seqlens;
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

std::string usage_text() {
  BenchOptions o;
  GridChoice grid;
  CLI::App app(kDescription, "dash-bench");
  define_options(app, o, grid);
  return app.help();
}

std::string score_mods_text(const ScoreMods& mods, const char* prefix, int digits) {
  std::string text;
  if (mods.has_window())
    text += " " + std::string(prefix) + "window " + std::to_string(mods.window_left) + "," +
            std::to_string(mods.window_right);
  if (mods.softcap > 0) {
    char cap[40];
    std::snprintf(cap, sizeof cap, "%.*g", digits, mods.softcap);
    text += " " + std::string(prefix) + "softcap " + cap;
  }
  return text;
}

std::string shape_text(const ProblemShape& s) {
  std::ostringstream out;
  out << s.batch << ',' << s.seqlen_q << ',' << s.seqlen_k << ',' << s.heads_q << ',' << s.heads_kv << ',' << s.head_dim;
  return out.str();
}

}  // namespace dash_attn::bench
