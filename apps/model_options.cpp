#include "model_options.hpp"

#include "cli_parse.hpp"
#include "dash_attn/kernel_table.hpp"
#include "dash_attn/schedule/resolve.hpp"

namespace dash_attn::model_cli {
namespace {

using cli::UsageError;

constexpr const char* kDescription = R"(Models the deterministic attention backward: makespan of each schedule on W
workers, the lower bound, idle time per worker, deadlocks (docs/schedules.md).
Every option takes its value as --key value or --key=value.
)";


double parse_cost(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value >= 0)) throw UsageError(flag + " expects a number >= 0, got '" + text + "'");
  return value;
}

// Every occurrence's comma-separated integers, appended in order.
void append_ints(const std::string& flag, const std::vector<std::string>& values, std::vector<int>& out) {
  for (const std::string& value : values)
    for (const std::string& part : cli::split_commas(value)) out.push_back(cli::option_int(flag, part, 0));
}

void append_schedules(const std::vector<std::string>& values, std::vector<ScheduleKind>& out) {
  for (const std::string& value : values)
    for (const std::string& name : cli::split_commas(value)) {
      const auto kind = parse_schedule_kind(name);
      if (!kind) throw UsageError("unknown schedule '" + name + "' (atomic, fa3, descending, shift, symmetric_shift, auto)");
      out.push_back(*kind);
    }
}

// An integer option with a lower bound, stored in `target`.
void add_int(CLI::App& app, const std::string& name, const std::string& value_name, int& target, int min,
             const std::string& help, const std::string& group) {
  cli::add_value(app, name, value_name, [&target, name, min](const std::string& v) { target = cli::option_int(name, v, min); },
                 help)->group(group);
}

void add_cost(CLI::App& app, const std::string& name, double& target, const std::string& help) {
  cli::add_value(app, name, "X", [&target, name](const std::string& v) { target = parse_cost(name, v); }, help)
      ->group("cost model (any unit; see docs/schedules.md)");
}

// Every option, its help and what it does to `o`: parsing and --help share it.
void define_options(CLI::App& app, ModelOptions& o) {
  cli::configure(app);
  const std::string problem = "problem", machine = "machine", output = "schedules and output";
  add_int(app, "--batch", "B", o.batch, 1, "sequences (1)", problem);
  add_int(app, "--heads", "H", o.heads, 1, "query heads (16)", problem);
  add_int(app, "--heads-kv", "H", o.heads_kv, 1, "key/value heads, divides --heads (= --heads)", problem);
  cli::add_value(app, "--seqlen", "L", [&](const std::string& v) { o.seqlen_q = o.seqlen_k = cli::option_int("--seqlen", v, 1); },
                 "seqlen_q = seqlen_k = L (4096)")->group(problem);
  add_int(app, "--seqlen-q", "L", o.seqlen_q, 1, "seqlen_q (over --seqlen)", problem);
  add_int(app, "--seqlen-k", "L", o.seqlen_k, 1, "seqlen_k (over --seqlen)", problem);
  cli::add_repeated(app, "--seqlens-q", "L1,L2,..",
                    [&](const std::vector<std::string>& v) { append_ints("--seqlens-q", v, o.seqlens_q); },
                    "varlen: one query length per sequence")->group(problem);
  cli::add_repeated(app, "--seqlens-k", "L1,L2,..",
                    [&](const std::vector<std::string>& v) { append_ints("--seqlens-k", v, o.seqlens_k); },
                    "varlen: one key length per sequence")->group(problem);
  cli::add_value(app, "--head-dim", "D", [&](const std::string& v) {
    o.head_dim = cli::option_int("--head-dim", v, 1);
    if (!is_supported_head_dim(o.head_dim)) throw UsageError("--head-dim must be 64, 128 or 256");
  }, "picks the backward tiles (128 -> 64x128)")->group(problem);
  add_int(app, "--block-m", "M", o.block_m, 1, "Q tile rows, overriding --head-dim", problem);
  add_int(app, "--block-n", "N", o.block_n, 1, "KV tile rows, overriding --head-dim", problem);
  app.add_flag("--causal", o.causal, "bottom-right aligned causal mask")->group(problem);
  cli::add_value(app, "--window", "L,R", [&](const std::string& v) {
    const std::vector<std::string> parts = cli::split_commas(v);
    if (parts.size() != 2) throw UsageError("--window expects L,R (two integers >= -1), got '" + v + "'");
    o.window_left = cli::option_int("--window", parts[0], -1);
    o.window_right = cli::option_int("--window", parts[1], -1);
  }, "sliding window (FlashAttention's window_size, bottom-right aligned, -1 unbounded; with --causal: (L, 0)); "
     "tiles outside the band are skipped; shift and symmetric_shift do not run windows")->group(problem);

  add_int(app, "--workers", "W", o.workers, 1, "resident workers (CTAs) (132)", machine);
  cli::add_value(app, "--assign", "dynamic|static", [&](const std::string& v) {
    if (v == "dynamic") o.assignment = model::Assignment::kDynamic;
    else if (v == "static") o.assignment = model::Assignment::kStatic;
    else throw UsageError("--assign expects dynamic or static, got '" + v + "'");
  }, "claim counter (the kernel) or item w + k*W (dynamic)")->group(machine);

  add_cost(app, "--c", o.cost.compute, "one step on a whole tile");
  add_cost(app, "--c-masked", o.cost.compute_masked, "one step that applies the mask (= --c)");
  add_cost(app, "--r", o.cost.reduce, "one dQ tile add");
  add_cost(app, "--s", o.cost.handoff, "a counter release seen by another worker");
  add_cost(app, "--prologue", o.cost.prologue, "per chain, before its first step");
  add_cost(app, "--epilogue", o.cost.epilogue, "per chain, after its last step");
  add_cost(app, "--r-dkv", o.cost.reduce_dkv, "GQA: one ordered dK + dV add");
  const std::string costs = "cost model (any unit; see docs/schedules.md)";
  app.add_flag("--overlap", o.cost.overlap_reduce, "dQ adds overlap the next compute (FA3's writer warp)")->group(costs);
  cli::add_value(app, "--dq-writers", "N", [&](const std::string& v) {
    o.cost.dq_writers = cli::option_int("--dq-writers", v, 1);
    if (o.cost.dq_writers > model::CostModel::kMaxDqWriters)
      throw UsageError("--dq-writers expects at most " + std::to_string(model::CostModel::kMaxDqWriters) + ", got " +
                       std::to_string(o.cost.dq_writers));
  }, "with --overlap: N dQ stages, one writer each (the kernel: 2)")->group(costs);
  app.add_flag("--drain", o.cost.drain_between_chains,
               "with --overlap: a chain starts after every writer finished (the kernel's CTA barrier between chains)")
      ->group(costs);

  cli::add_repeated(app, "--schedules", "a,b,..",
                    [&](const std::vector<std::string>& v) { append_schedules(v, o.schedules); },
                    "from atomic,fa3,descending,shift,symmetric_shift,auto")->group(output);
  app.add_option_function<std::vector<std::string>>("--paper", [&](const std::vector<std::string>& v) {
    if (v.size() != 2) throw UsageError("--paper needs 2 values (N M)");
    o.paper = std::make_pair(cli::option_int("--paper", v[0], 1), cli::option_int("--paper", v[1], 1));
  }, "the paper's setting: N workers = N KV tiles = N Q tiles, M heads, uniform c and r, s = 0, serial, static")
      ->option_text("N M")->expected(2)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->group(output);
  app.add_flag("--optimum", o.optimum, "also the exact optimum (small problems only)")->group(output);
  cli::add_value(app, "--svg", "FILE", [&](const std::string& v) { o.svg = v; }, "Gantt chart of the schedules")
      ->group(output);
  app.add_flag("--json", o.json, "one JSON object per schedule instead of the table")->group(output);
  cli::add_value(app, "--calibrate", "FILE", [&](const std::string& v) { o.calibrate = v; },
                 "fit c, c_masked, r, s and the per-chain cost to the backward rows of a dash-bench --json file (per "
                 "head dim, standard grid shapes, the file's SM count) and print measured vs modeled times as "
                 "Markdown; takes no other option")->group("calibration");
  app.add_flag("-h,--help", o.help, "this help")->group(output);
}

std::size_t options_given(const CLI::App& app, const std::string& except) {
  std::size_t count = 0;
  for (const CLI::Option* option : app.get_options())
    if (option->get_name() != except) count += option->count();
  return count;
}

}  // namespace

ModelOptions parse_model_options(const std::vector<std::string>& args) {
  ModelOptions o;
  CLI::App app(kDescription, "dash-model");
  define_options(app, o);
  cli::parse(app, args);
  if (o.help) return o;
  if (!o.calibrate.empty()) {
    if (options_given(app, "--calibrate") > 0) throw UsageError("--calibrate takes one file and no other option");
    return o;
  }
  if (o.heads_kv == 0) o.heads_kv = o.heads;
  if (o.heads % o.heads_kv != 0) throw UsageError("--heads-kv must divide --heads");
  if (!o.seqlens_q.empty() || !o.seqlens_k.empty()) {
    if (o.seqlens_q.empty()) o.seqlens_q = o.seqlens_k;
    if (o.seqlens_k.empty()) o.seqlens_k = o.seqlens_q;
    if (o.seqlens_q.size() != o.seqlens_k.size())
      throw UsageError("--seqlens-q and --seqlens-k need one length per sequence each");
    o.batch = static_cast<int>(o.seqlens_q.size());
  }
  if (o.paper) {
    for (const char* flag : {"--c-masked", "--s", "--prologue", "--epilogue", "--overlap", "--dq-writers", "--drain"})
      if (cli::given(app, flag))
        throw UsageError("--paper fixes the cost model (uniform c, s = 0, no prologue/epilogue, serial); only --c and "
                         "--r apply");
    if (o.cost.compute <= 0) throw UsageError("--paper needs --c > 0");
  }
  if (!cli::given(app, "--c-masked")) o.cost.compute_masked = o.cost.compute;
  const bool window = o.window_left >= 0 || (!o.causal && o.window_right >= 0);  // TileProblem::has_window
  if (window && o.paper) throw UsageError("--paper has no --window");
  if (o.schedules.empty()) {
    o.schedules = {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending};
    if (!window) o.schedules.push_back(o.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift);
    o.schedules.push_back(ScheduleKind::kAuto);
  }
  if (window)
    for (ScheduleKind kind : o.schedules)
      if (!schedule::supports_window(kind))
        throw UsageError(std::string("schedule ") + std::string(to_string(kind)) +
                         " does not run a sliding window (--window): its waves assume no left bound");
  return o;
}

std::string model_usage_text() {
  ModelOptions o;
  CLI::App app(kDescription, "dash-model");
  define_options(app, o);
  return app.help();
}

}  // namespace dash_attn::model_cli
