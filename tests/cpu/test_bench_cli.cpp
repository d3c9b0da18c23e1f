// dash-bench's command line, its cases and its repro lines (apps/bench):
// the grid and --shape give the intended problems, --key=value reads as
// --key value, malformed flags and unknown options fail with a message naming
// the flag, and each row's repro line parses back to that row's case, pass
// and schedule alone.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "bench/cases.hpp"
#include "bench/options.hpp"
#include "bench/repro.hpp"

namespace dash_attn::bench {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

BenchOptions parse(const std::string& line) { return parse_options(words(line)); }

bool same(const ProblemShape& a, const ProblemShape& b) {
  return a.batch == b.batch && a.seqlen_q == b.seqlen_q && a.seqlen_k == b.seqlen_k && a.heads_q == b.heads_q &&
         a.heads_kv == b.heads_kv && a.head_dim == b.head_dim;
}

std::string usage_error(const std::string& line) {
  try {
    parse(line);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(BenchOptions, DefaultIsTheStandardGrid) {
  const BenchOptions o = parse("");
  const std::vector<BenchCase> cases = bench_cases(o);
  ASSERT_EQ(cases.size(), 2u * 2u * 6u);  // head dims x masks x seqlens
  EXPECT_TRUE(same(cases.front().shape, ProblemShape{32, 512, 512, 32, 32, 64}));
  EXPECT_FALSE(cases.front().causal);
  EXPECT_TRUE(same(cases.back().shape, ProblemShape{1, 16384, 16384, 16, 16, 128}));
  EXPECT_TRUE(cases.back().causal);
  EXPECT_EQ(o.schedules.size(), 6u);
  EXPECT_TRUE(o.forward && o.backward);
  EXPECT_FALSE(o.verify);
  EXPECT_EQ(o.verify_max_seqlen, 2048);
}

TEST(BenchOptions, GridFlagsNarrowTheGridInAnyOrder) {
  for (const char* line : {"--hdims 64 --grid quick", "--grid quick --hdims 64"}) {
    const std::vector<BenchCase> cases = bench_cases(parse(line));
    ASSERT_EQ(cases.size(), 4u) << line;  // hdim 64 x 2 masks x seqlens 1k, 4k
    EXPECT_TRUE(same(cases[0].shape, ProblemShape{16, 1024, 1024, 32, 32, 64})) << line;
    EXPECT_TRUE(same(cases[1].shape, ProblemShape{4, 4096, 4096, 32, 32, 64})) << line;
  }
}

TEST(BenchOptions, ShapesReplaceTheGridAndAllowGqa) {
  const BenchOptions o = parse("--shape 2,4096,4096,32,8,128 --shape 1,512,2048,16,1,64 --masks causal");
  const std::vector<BenchCase> cases = bench_cases(o);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_TRUE(same(cases[0].shape, ProblemShape{2, 4096, 4096, 32, 8, 128}));
  EXPECT_TRUE(same(cases[1].shape, ProblemShape{1, 512, 2048, 16, 1, 64}));
  EXPECT_TRUE(cases[0].causal && cases[1].causal);
  EXPECT_EQ(shape_text(cases[0].shape), "2,4096,4096,32,8,128");
}

TEST(BenchOptions, PassesMasksSchedulesAndChecks) {
  const BenchOptions o = parse("--passes bwd --masks full --schedules fa3,shift --dtype fp16 --reps 5 --settle-ms 0 "
                               "--determinism-runs 0 --verify --verify-max-seqlen 0 --json a.json --csv b.csv --commit abc");
  EXPECT_FALSE(o.forward);
  EXPECT_TRUE(o.backward);
  EXPECT_EQ(o.masks, std::vector<bool>{false});
  EXPECT_EQ(o.schedules, (std::vector<ScheduleKind>{ScheduleKind::kFA3, ScheduleKind::kShift}));
  EXPECT_EQ(o.dtype, DType::kFP16);
  EXPECT_EQ(o.repetitions, 5);
  EXPECT_EQ(o.settle_ms, 0);
  EXPECT_EQ(parse("").settle_ms, 500);
  EXPECT_EQ(o.determinism_runs, 0);
  EXPECT_TRUE(o.verify);
  EXPECT_EQ(o.verify_max_seqlen, 0);
  EXPECT_EQ(o.json_path, "a.json");
  EXPECT_EQ(o.csv_path, "b.csv");
  EXPECT_EQ(o.commit, "abc");
  EXPECT_TRUE(parse("--help").help);
}

TEST(BenchOptions, MalformedFlagsNameTheFlag) {
  EXPECT_NE(usage_error("--frobnicate").find("unknown option '--frobnicate'"), std::string::npos);
  EXPECT_NE(usage_error("--json").find("--json needs a value"), std::string::npos);
  EXPECT_NE(usage_error("--shape 1,2,3").find("--shape expects batch,seqlen_q"), std::string::npos);
  EXPECT_NE(usage_error("--shape 1,1024,1024,32,5,128").find("must divide"), std::string::npos);
  EXPECT_NE(usage_error("--shape 1,1024,1024,0,1,128").find("--shape expects an integer >= 1"), std::string::npos);
  EXPECT_NE(usage_error("--shape 1,1024,1024,8,8,128 --seqlens 512").find("drop --seqlens"), std::string::npos);
  EXPECT_NE(usage_error("--seqlens 512,").find("--seqlens expects an integer"), std::string::npos);
  EXPECT_NE(usage_error("--seqlens 1k").find("got '1k'"), std::string::npos);
  EXPECT_NE(usage_error("--seqlens 32768").find("use --shape"), std::string::npos);
  EXPECT_NE(usage_error("--masks full,diagonal").find("got 'diagonal'"), std::string::npos);
  EXPECT_NE(usage_error("--schedules fa3,fastest").find("unknown schedule 'fastest'"), std::string::npos);
  EXPECT_NE(usage_error("--passes fwd,both").find("got 'both'"), std::string::npos);
  EXPECT_NE(usage_error("--dtype fp8").find("--dtype expects bf16 or fp16"), std::string::npos);
  EXPECT_NE(usage_error("--reps 0").find("--reps expects an integer >= 1"), std::string::npos);
  EXPECT_NE(usage_error("--settle-ms=-1").find("--settle-ms expects an integer >= 0"), std::string::npos);
  EXPECT_NE(usage_error("--grid huge").find("--grid expects standard or quick"), std::string::npos);
}

TEST(BenchOptions, KeyEqualsValueReadsAsKeySpaceValue) {
  const BenchOptions spaced = parse("--passes bwd --masks full --schedules fa3,shift --dtype fp16 --reps 5 "
                                    "--determinism-runs 0 --verify-max-seqlen 0 --json a.json --csv b.csv --commit abc");
  const BenchOptions joined = parse("--passes=bwd --masks=full --schedules=fa3,shift --dtype=fp16 --reps=5 "
                                    "--determinism-runs=0 --verify-max-seqlen=0 --json=a.json --csv=b.csv --commit=abc");
  EXPECT_EQ(joined.forward, spaced.forward);
  EXPECT_EQ(joined.backward, spaced.backward);
  EXPECT_EQ(joined.masks, spaced.masks);
  EXPECT_EQ(joined.schedules, spaced.schedules);
  EXPECT_EQ(joined.dtype, spaced.dtype);
  EXPECT_EQ(joined.repetitions, 5);
  EXPECT_EQ(joined.determinism_runs, 0);
  EXPECT_EQ(joined.verify_max_seqlen, 0);
  EXPECT_EQ(joined.json_path, "a.json");
  EXPECT_EQ(joined.csv_path, "b.csv");
  EXPECT_EQ(joined.commit, "abc");

  const std::vector<BenchCase> grid = bench_cases(parse("--grid=quick --hdims=64 --seqlens=512,1024"));
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_TRUE(same(grid[0].shape, ProblemShape{32, 512, 512, 32, 32, 64}));
  const BenchOptions shapes = parse("--shape=2,4096,4096,32,8,128 --shape 1,512,2048,16,1,64");
  ASSERT_EQ(shapes.shapes.size(), 2u);
  EXPECT_TRUE(same(shapes.shapes[0], ProblemShape{2, 4096, 4096, 32, 8, 128}));
  EXPECT_TRUE(same(shapes.shapes[1], ProblemShape{1, 512, 2048, 16, 1, 64}));
  // A value may start with '-' or hold '=' (a path): it still belongs to its option.
  EXPECT_NE(usage_error("--reps=-1").find("--reps expects an integer >= 1, got '-1'"), std::string::npos);
  EXPECT_EQ(parse("--json=out=1.json").json_path, "out=1.json");
  EXPECT_EQ(usage_error("--reps="), "--reps needs a value");
  EXPECT_TRUE(parse("--verify=true").verify);
  EXPECT_FALSE(parse("--verify=false").verify);
  EXPECT_EQ(usage_error("--verify=maybe"), "--verify is a switch and takes no value, got 'maybe'");
}

TEST(BenchOptions, RepeatedOptionKeepsTheLastValue) {
  EXPECT_EQ(parse("--reps 3 --reps=4").repetitions, 4);
  EXPECT_EQ(parse("--masks causal --masks full").masks, std::vector<bool>{false});
  EXPECT_TRUE(parse("--verify --verify").verify);
}

TEST(BenchOptions, UnknownOptionIsAClearError) {
  EXPECT_EQ(usage_error("--frobnicate"), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error("--frobnicate=3"), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error("--reps 3 --frobnicate 4"), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error("--rep 3"), "unknown option '--rep' (did you mean --reps?)");
  EXPECT_EQ(usage_error("--verfy"), "unknown option '--verfy' (did you mean --verify?)");
  EXPECT_EQ(usage_error("-x"), "unknown option '-x'");
  EXPECT_EQ(usage_error("quick"), "unexpected argument 'quick' (every value follows its option)");
  EXPECT_EQ(usage_error("--reps 3 4"), "unexpected argument '4' (every value follows its option)");
  EXPECT_EQ(usage_error("--reps"), "--reps needs a value");
}

TEST(BenchOptions, HelpListsEveryOption) {
  const std::string help = usage_text();
  for (const char* option : {"--grid", "--hdims", "--seqlens", "--shape", "--masks", "--schedules", "--passes", "--dtype",
                             "--reps", "--settle-ms", "--determinism-runs", "--verify-max-seqlen", "--verify", "--model", "--json",
                             "--csv", "--commit", "--help"})
    EXPECT_NE(help.find(std::string(option) + " "), std::string::npos) << option;
  EXPECT_NE(help.find("--key=value"), std::string::npos);
  EXPECT_TRUE(parse("-h").help);
}

TEST(BenchCases, SeedDependsOnTheCaseOnly) {
  // A grid row and its --shape repro generate the same inputs.
  const std::vector<BenchCase> grid = bench_cases(parse("--grid quick --masks causal"));
  const std::vector<BenchCase> chosen = bench_cases(parse("--shape 4,4096,4096,16,16,128 --masks causal"));
  EXPECT_EQ(case_seed(grid[1]), case_seed(chosen[0]));
  EXPECT_NE(case_seed(grid[0]), case_seed(grid[1]));
  EXPECT_NE(case_seed(BenchCase{grid[1].shape, false}), case_seed(grid[1]));
}

TEST(BenchCases, FlopsFollowTheConvention) {
  const ProblemShape s{2, 1024, 2048, 8, 2, 128};
  EXPECT_DOUBLE_EQ(forward_flops(s, false), 4.0 * 2 * 8 * 1024 * 2048 * 128);
  EXPECT_DOUBLE_EQ(forward_flops(s, true), 2.0 * 2 * 8 * 1024 * 2048 * 128);
}

TEST(BenchCases, WindowedFlopsCountTheBandRowByRow) {
  const BenchOptions o = parse("--shape 1,16,16,2,1,64 --masks causal --window 3,0 --softcap 50");
  ASSERT_EQ(bench_cases(o).size(), 1u);
  const BenchCase c = bench_cases(o)[0];
  EXPECT_EQ(c.mods.window_left, 3);
  EXPECT_EQ(c.mods.window_right, 0);
  EXPECT_DOUBLE_EQ(c.mods.softcap, 50);
  // Rows 0..2 see 1..3 keys, rows 3..15 see 4: 6 + 13 * 4 = 58 of 256 pairs.
  EXPECT_DOUBLE_EQ(forward_flops(c), 4.0 * 2 * 58 * 64);
  EXPECT_EQ(mask_text(c), "causal window 3,0 softcap 50");
  const Options options = case_options(c);
  EXPECT_TRUE(options.causal);
  EXPECT_EQ(options.window_left, 3);
  EXPECT_FLOAT_EQ(options.softcap, 50.f);
  // No window: the convention (causal = half), whatever the softcap.
  const BenchCase capped{c.shape, true, ScoreMods{-1, -1, 30}};
  EXPECT_DOUBLE_EQ(forward_flops(capped), forward_flops(c.shape, true));
  // A right bound without causal: row r sees [r - 2, r + 1].
  const BenchCase band{ProblemShape{1, 4, 4, 1, 1, 8}, false, ScoreMods{2, 1, 0}};
  EXPECT_DOUBLE_EQ(forward_flops(band), 4.0 * (2 + 3 + 4 + 3) * 8);
  for (const char* bad : {"--window 3", "--window 1,2,3", "--window -2,0", "--softcap -1", "--softcap x"})
    EXPECT_THROW(parse(bad), UsageError) << bad;
}

TEST(BenchCases, ReducedShapeKeepsHeadDimAndGroup) {
  EXPECT_TRUE(same(reduced_shape(ProblemShape{1, 16384, 16384, 16, 16, 128}), ProblemShape{1, 1024, 1024, 2, 2, 128}));
  EXPECT_TRUE(same(reduced_shape(ProblemShape{4, 8192, 8192, 32, 8, 64}), ProblemShape{2, 1024, 1024, 8, 2, 64}));
  EXPECT_TRUE(same(reduced_shape(ProblemShape{3, 512, 16384, 32, 1, 128}), ProblemShape{2, 32, 1024, 32, 1, 128}));
  const ProblemShape small{2, 1000, 700, 4, 2, 64};
  EXPECT_TRUE(same(reduced_shape(small), small));
}

TEST(BenchCases, SliceCheckUpToVerifyMaxSeqlen) {
  const BenchOptions o = parse("--verify-max-seqlen 2048");
  EXPECT_TRUE(slice_checked(o, ProblemShape{8, 2048, 2048, 16, 16, 128}));
  EXPECT_FALSE(slice_checked(o, ProblemShape{8, 1024, 4096, 16, 16, 128}));
  EXPECT_FALSE(slice_checked(parse("--verify-max-seqlen 0"), ProblemShape{1, 1, 1, 1, 1, 64}));
}

TEST(BenchRepro, EachRowsLineParsesBackToThatRowAlone) {
  const BenchOptions o = parse("--grid quick --reps 7 --settle-ms 20 --determinism-runs 3 --verify");
  for (const BenchCase& c : bench_cases(o)) {
    for (const ScheduleKind kind : o.schedules) {
      const std::string line = repro_command(o, c, Pass::kBackward, kind);
      std::vector<std::string> args = words(line);
      ASSERT_EQ(args.front(), "dash-bench");
      const BenchOptions r = parse_options(std::vector<std::string>(args.begin() + 1, args.end()));
      const std::vector<BenchCase> cases = bench_cases(r);
      ASSERT_EQ(cases.size(), 1u) << line;
      EXPECT_TRUE(same(cases[0].shape, c.shape)) << line;
      EXPECT_EQ(cases[0].causal, c.causal) << line;
      EXPECT_EQ(case_seed(cases[0]), case_seed(c)) << line;
      EXPECT_EQ(r.schedules, std::vector<ScheduleKind>{kind}) << line;
      EXPECT_TRUE(r.backward && !r.forward) << line;
      EXPECT_EQ(r.repetitions, 7) << line;
      EXPECT_EQ(r.settle_ms, 20) << line;
      EXPECT_EQ(r.determinism_runs, kind == ScheduleKind::kAtomic ? 10 : 3) << line;
      EXPECT_TRUE(r.verify) << line;
    }
    const BenchOptions f = parse_options([&] {
      std::vector<std::string> args = words(repro_command(o, c, Pass::kForward, ScheduleKind::kAuto));
      return std::vector<std::string>(args.begin() + 1, args.end());
    }());
    EXPECT_TRUE(f.forward && !f.backward);
  }
}

TEST(BenchRepro, ScoreModsAreSpelledOutAndParseBack) {
  const BenchOptions o = parse("--shape 1,8192,8192,16,8,256 --masks causal --window 4096,0 --softcap 50");
  const BenchCase c = bench_cases(o)[0];
  const std::string line = repro_command(o, c, Pass::kBackward, ScheduleKind::kAuto);
  EXPECT_NE(line.find(" --window 4096,0 --softcap 50"), std::string::npos) << line;
  std::vector<std::string> args = words(line);
  const BenchCase back = bench_cases(parse_options(std::vector<std::string>(args.begin() + 1, args.end())))[0];
  EXPECT_EQ(mask_text(back), mask_text(c));
}

TEST(BenchRepro, DefaultsAreNotSpelledOut) {
  const BenchOptions o = parse("");
  const BenchCase c{ProblemShape{2, 4096, 4096, 32, 8, 128}, true};
  EXPECT_EQ(repro_command(o, c, Pass::kBackward, ScheduleKind::kFA3),
            "dash-bench --shape 2,4096,4096,32,8,128 --masks causal --passes bwd --schedules fa3 --dtype bf16");
  EXPECT_EQ(repro_command(o, c, Pass::kForward, ScheduleKind::kFA3),
            "dash-bench --shape 2,4096,4096,32,8,128 --masks causal --passes fwd --dtype bf16");
}

}  // namespace
}  // namespace dash_attn::bench
